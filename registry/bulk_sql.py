"""Statements on many rows that cost the database, not Django and the driver.

``filter(pk__in=ids)`` sends one parameter per id: with thousands, building the lookup and psycopg's splitting of the
query into placeholders cost far more than the query itself. PostgreSQL takes the list as one array parameter
instead; SQLite keeps ``IN`` (its callers keep lists within its variable limit). (figures: docs/benchmarks.md,
"Figures behind design choices")
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection, models
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL


def chunks(ids: list[int]) -> Iterable[list[int]]:
    """Id lists short enough for one statement's parameters (SQLite's limit; one chunk on PostgreSQL)."""
    size = max(100, (connection.features.max_query_params or len(ids) + 10) - 10)
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def id_in(model: type[models.Model], field: str, ids: Iterable[int]) -> Q | RawSQL:
    """A condition for ``model.objects.filter()``: ``field`` (a column of ``model``'s own table: its primary key or a
    foreign key's id) is one of ``ids``."""
    values = [int(i) for i in ids]
    if connection.vendor != "postgresql":
        return Q(**{f"{field}__in": values})
    column = _column(model, field).column
    # Both names come from the model's own metadata, never from input; the ids travel as one bound parameter.
    sql = f'"{model._meta.db_table}"."{column}" = ANY(%s)'
    return RawSQL(sql, (values,), output_field=BooleanField())  # noqa: S611


def bulk_set(model: type[models.Model], objs: Sequence[models.Model], fields: Sequence[str], batch: int = 1000) -> None:
    """``model.objects.bulk_update(objs, fields)``, as one ``UPDATE … FROM (VALUES …)`` per batch on PostgreSQL.

    Hand-written because Django's bulk_update writes a CASE over every row for every column, which both Django and
    the server evaluate per row; this statement sends each row's values once and joins them by primary key. A base
    model whose shown file changes moves thousands of pairs in one registration."""
    if not objs:
        return
    _refuse_too_long(model, objs, fields)
    if connection.vendor != "postgresql":
        model._default_manager.bulk_update(objs, fields, batch_size=batch)
        return
    meta = model._meta
    cols = [_column(model, name) for name in fields]
    pk = meta.pk
    if pk is None:  # (never: every concrete model has one)
        raise ValueError(f"{meta.label} has no primary key")
    # Names and types from the model's own metadata, never from input; every value is a bound parameter.
    names = ", ".join(f'"{c.column}"' for c in cols)
    sets = ", ".join(f'"{c.column}" = v."{c.column}"::{c.db_type(connection)}' for c in cols)
    row = "(" + ", ".join(["%s"] * (len(cols) + 1)) + ")"
    for start in range(0, len(objs), batch):
        chunk = objs[start : start + batch]
        params: list[Any] = []
        for obj in chunk:
            params.append(obj.pk)
            params += [c.get_db_prep_value(getattr(obj, c.attname), connection) for c in cols]
        # Identifiers from model metadata, values bound.
        values = ", ".join([row] * len(chunk))
        head = f'UPDATE "{meta.db_table}" SET {sets} FROM (VALUES {values}) AS v("_pk", {names}) '  # noqa: S608
        sql = head + f'WHERE "{meta.db_table}"."{pk.column}" = v."_pk"::{pk.db_type(connection)}'
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def update_by_value(
    model: type[models.Model], columns: Sequence[str], values: Mapping[int, tuple[object, ...]]
) -> None:
    """Set ``columns`` of each row (by primary key) to its tuple in ``values``: one UPDATE per distinct tuple (and
    per chunk of ids), in the order the tuples first appear. Thousands of rows given the same values (a class a
    popular draft gains turns all its pairs "partial") cost one statement, where ``bulk_update`` would build a CASE
    per row and column."""
    groups: dict[tuple[object, ...], list[int]] = defaultdict(list)
    for pk, row in values.items():
        groups[row].append(pk)
    pk_name = model._meta.pk.name if model._meta.pk is not None else "id"
    for row, pks in groups.items():
        for ids in chunks(pks):
            model._default_manager.filter(id_in(model, pk_name, ids)).update(**dict(zip(columns, row, strict=True)))


def _refuse_too_long(model: type[models.Model], objs: Sequence[models.Model], fields: Sequence[str]) -> None:
    """A value longer than its column allows is refused on every backend: PostgreSQL's ``::varchar(n)`` cast above
    would cut it silently, and SQLite would store it whole (it ignores varchar lengths)."""
    for name in fields:
        field = _column(model, name)
        limit = getattr(field, "max_length", None)
        if not isinstance(field, models.CharField) or not limit:
            continue
        for obj in objs:
            value = getattr(obj, field.attname)
            if isinstance(value, str) and len(value) > limit:
                raise ValueError(
                    f"{model._meta.label}.{name} of row {obj.pk}: {len(value)} characters, more than its {limit}"
                )


def _column(model: type[models.Model], name: str) -> models.Field:
    """The model's own field ``name`` (a column of its table), never a relation seen from the other side."""
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or not field.concrete:
        raise ValueError(f"{model._meta.label}.{name} is not a column of its table")
    return field
