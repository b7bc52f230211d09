"""Keyset paging: opaque cursors holding a row's sort key, and the row comparison that starts a page after one."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import models
from django.db.models import F, Value

from registry.sort_keys import SortKey


class RowCompare(models.Expression):
    """``(a, b, id) > (x, y, z)``: PostgreSQL turns it into an index range start, an OR of terms it cannot."""

    output_field = models.BooleanField()
    conditional = True

    def __init__(self, expressions: tuple[models.Expression | F, ...], op: str, values: list[Any]) -> None:
        super().__init__()
        if op not in ("<", ">") or len(expressions) != len(values):
            raise ValueError(f"a row comparison needs < or > and one value per expression, not {op!r}")
        self.expressions, self.op = list(expressions), op
        self.values = [Value(v) for v in values]

    def get_source_expressions(self) -> list:
        return [*self.expressions, *self.values]

    def set_source_expressions(self, exprs: Sequence[Any]) -> None:
        n = len(self.expressions)
        self.expressions, self.values = list(exprs[:n]), list(exprs[n:])

    def as_sql(self, compiler, connection) -> tuple[str, list]:  # type: ignore[override]  # django-stubs says a tuple of params; Django's own as_sql methods return lists too
        sides, params = [], []
        for side in (self.expressions, self.values):
            parts = []
            for e in side:
                sql, p = compiler.compile(e)
                parts.append(sql)
                params.extend(p)
            sides.append(f"({', '.join(parts)})")
        return f"{sides[0]} {self.op} {sides[1]}", params


def after(key: SortKey, values: list[Any]) -> RowCompare:
    """Rows that come after ``values`` in ``key``'s order."""
    return RowCompare(key.expressions, "<" if key.descending else ">", values)


def before(key: SortKey, values: list[Any]) -> RowCompare:
    return RowCompare(key.expressions, ">" if key.descending else "<", values)


def order_by(key: SortKey, reverse: bool = False) -> list:
    descending = key.descending != reverse
    return [e.desc() if descending else e.asc() for e in key.expressions]


def encode(values: list[Any]) -> str:
    """A cursor for a row's key values: URL-safe, opaque to people, checked again when read."""
    plain = [v.isoformat() if isinstance(v, datetime) else v for v in values]
    raw = json.dumps(plain, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(key: SortKey, cursor: str) -> list[Any] | None:
    """The key values in ``cursor`` when they fit ``key`` (a cursor from another sort, or junk: None)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if not isinstance(values, list) or len(values) != len(key.kinds):
        return None
    out: list[Any] = []
    for v, kind in zip(values, key.kinds, strict=True):
        # Values a database column can hold, or the cursor is junk (not a database error).
        if kind == "float" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
        elif kind == "int" and isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63:
            out.append(v)
        elif kind == "str" and isinstance(v, str):
            out.append(v)
        elif kind == "datetime" and isinstance(v, str):
            try:
                out.append(datetime.fromisoformat(v))
            except ValueError:
                return None
        else:
            return None
    return out
