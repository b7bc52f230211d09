"""Pages of the pairs table read by keyset (a cursor, not OFFSET), counts that never scan the whole table, and
streaming."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db import connections
from django.db.models import QuerySet

from registry.cache_keys import cached
from registry.models import Pair
from registry.sort_keys import SortKey, sort_key
from registry.table import keyset
from registry.table.cells import Row
from registry.table.filters import filtered_pairs
from registry.table.request import PAGE_SIZE, TableQuery
from registry.table.rows import pairs_by_id, rows_for

# Up to this many matching pairs the count is exact (counting them is an index range); above it
# PostgreSQL's own estimate is shown as "about N" (elsewhere: "more than N").
EXACT_COUNT_LIMIT = 1000
STREAM_CHUNK = 500  # rows per keyset query of the CSV and JSON streams


@dataclass
class TablePage:
    tq: TableQuery
    number: int
    count: int
    count_exact: bool
    has_next: bool
    has_previous: bool
    next_cursor: str = ""
    previous_cursor: str = ""
    estimated: bool = True  # count is PostgreSQL's estimate (else a lower bound) when not exact

    @property
    def num_pages(self) -> int:
        return max(self.number + self.has_next, math.ceil(self.count / PAGE_SIZE), 1)

    @property
    def has_other_pages(self) -> bool:
        return self.has_next or self.has_previous

    @property
    def count_text(self) -> str:
        noun = "pair" if self.count == 1 else "pairs"
        if self.count_exact:
            return f"{self.count:,} {noun}"
        return f"about {self.count:,} {noun}" if self.estimated else f"more than {EXACT_COUNT_LIMIT:,} pairs"

    @property
    def pages_text(self) -> str:
        if self.count_exact:
            return f"Page {self.number:,} of {self.num_pages:,}"
        return f"Page {self.number:,} of about {self.num_pages:,}" if self.estimated else f"Page {self.number:,}"

    def query(self, direction: str) -> str:
        """The query string of the next or previous page: a cursor, so it costs what the first page costs."""
        if direction == "next":
            return "?" + urlencode(self.tq.params(page=self.number + 1, after=self.next_cursor))
        if self.number <= 2:
            return "?" + urlencode(self.tq.params(page=1))
        return "?" + urlencode(self.tq.params(page=self.number - 1, before=self.previous_cursor))

    @property
    def next_query(self) -> str:
        return self.query("next")

    @property
    def previous_query(self) -> str:
        return self.query("previous")


def keyed(qs: QuerySet[Pair], key: SortKey) -> QuerySet:
    """Pair ids with their key values, in the key's order (the last key value is the id)."""
    names = {f"_k{i}": e for i, e in enumerate(key.expressions[:-1])}
    return qs.annotate(**names).values_list(*names, "pk")


def page_of(tq: TableQuery) -> tuple[TablePage, list[Row]]:
    key = sort_key(tq.sort)
    base, m = narrowed(tq)
    after = keyset.decode(key, tq.after) if tq.after else None
    before = keyset.decode(key, tq.before) if tq.before and not after else None
    number = tq.page
    if after is not None:
        found = list(keyed(base, key).filter(keyset.after(key, after)).order_by(*keyset.order_by(key))[: PAGE_SIZE + 1])
        has_previous, has_next = True, len(found) > PAGE_SIZE
        number = max(number, 2)
    elif before is not None:
        found = list(
            keyed(base, key)
            .filter(keyset.before(key, before))
            .order_by(*keyset.order_by(key, reverse=True))[: PAGE_SIZE + 1]
        )
        has_previous, has_next = len(found) > PAGE_SIZE, True
        found = found[:PAGE_SIZE][::-1]
        number = max(number, 2) if has_previous else 1
    else:
        # ?page=N without a cursor (old links, typed numbers): OFFSET over the sort index, dearer
        # the deeper it goes; the Next/Previous links it renders are cursors again.
        found = _offset_page(base, key, number) if m.count else []
        if not found and number > 1:  # past the end: the last page, as Django's paginator did
            number = max(1, math.ceil((m.count if m.exact else base.count()) / PAGE_SIZE))
            found = _offset_page(base, key, number)
        has_previous, has_next = number > 1, len(found) > PAGE_SIZE
    found = found[:PAGE_SIZE]
    if m.exact:  # a cursor's page number is carried in the link: trust the count where it is known
        number = min(number, max(1, math.ceil(m.count / PAGE_SIZE)))
    page = TablePage(
        tq,
        number,
        m.count,
        m.exact,
        has_next,
        has_previous,
        next_cursor=keyset.encode(list(found[-1])) if found and has_next else "",
        previous_cursor=keyset.encode(list(found[0])) if found and has_previous else "",
        estimated=m.estimated,
    )
    return page, rows_for([f[-1] for f in found], tq)


def _offset_page(base: QuerySet[Pair], key: SortKey, number: int) -> list[tuple]:
    start = (number - 1) * PAGE_SIZE
    return list(keyed(base, key).order_by(*keyset.order_by(key))[start : start + PAGE_SIZE + 1])


@dataclass
class Matches:
    """How many pairs the filters match; with few, which (counting them read them anyway)."""

    count: int
    exact: bool
    estimated: bool  # count is PostgreSQL's estimate (else, when not exact, a lower bound)
    ids: list[int] | None = None  # every matching pair when exact


def matches(tq: TableQuery, base: QuerySet[Pair]) -> Matches:
    """Exact up to EXACT_COUNT_LIMIT (one index or bitmap range), else the planner's estimate; cached per filter."""

    def compute() -> Matches:
        ids = list(base.order_by().values_list("pk", flat=True)[: EXACT_COUNT_LIMIT + 1])
        if len(ids) <= EXACT_COUNT_LIMIT:
            return Matches(len(ids), True, False, ids)
        guess = estimate(base)
        return Matches(max(guess, len(ids)), False, True) if guess is not None else Matches(len(ids), False, False)

    # The count depends on the filters and on what the viewer may see (the search), not on the page, the cursor
    # or the order.
    return cached("count", repr(sorted(tq.params(page=1, sort="-speedup").items())), compute, viewer=tq.viewer)


def narrowed(tq: TableQuery) -> tuple[QuerySet[Pair], Matches]:
    """The filtered pairs and their count. Few matches are named by id: PostgreSQL then sorts those few
    rather than walk a sort index past thousands of others (its estimate of a substring search can be
    off a hundredfold)."""
    base = filtered_pairs(tq)
    m = matches(tq, base)
    return (pairs_by_id(m.ids) if m.ids is not None else base), m


def estimate(qs: QuerySet) -> int | None:
    """PostgreSQL's estimate of how many rows ``qs`` returns (planning only, no rows read)."""
    if connections[qs.db].vendor != "postgresql":
        return None
    plan = json.loads(qs.order_by().explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])


def iter_rows(tq: TableQuery) -> Iterator[list[Row]]:
    """Every row of the filtered table in its order, a chunk at a time, each chunk read after the last by keyset."""
    chunk = STREAM_CHUNK
    key = sort_key(tq.sort)
    base = keyed(narrowed(tq)[0], key).order_by(*keyset.order_by(key))
    cursor: list[Any] | None = None
    while True:
        qs = base.filter(keyset.after(key, cursor)) if cursor is not None else base
        found = list(qs[:chunk])
        if not found:
            return
        yield rows_for([f[-1] for f in found], tq)
        if len(found) < chunk:
            return
        cursor = list(found[-1])
