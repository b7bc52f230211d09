"""The pairs table's filters as querysets of the pair table alone: the verdict, the search (with the pairs other
apps find for its text), the speed-up floor and the filters that look inside results."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import Q, QuerySet
from django.db.models.lookups import GreaterThanOrEqual

from registry.adapt_stored import adaptable_rows
from registry.hooks import all_named
from registry.models import Pair
from registry.results.figures import pairs_with_results
from registry.sort_keys import LOW_FLOAT, sort_key
from registry.table.request import TableQuery


def _literal(text: str) -> str:
    """A regular expression matching ``text`` itself, read alike by PostgreSQL (AREs) and Python (SQLite's REGEXP):
    every ASCII character other than a letter or digit behind a backslash, which both read as the character."""
    return "".join(f"\\{c}" if c.isascii() and not c.isalnum() else c for c in text)


def shown_search(q: str) -> Q:
    """Pairs whose search text contains ``q`` (lower-case, one line) where a viewer who may not see server paths
    is shown it.

    That viewer is shown a Hub source whole (``hf://owner/repo/x.gguf``), a local file's source only from its
    last "/" on (registry.access.redact cuts its folder), and the model names, architectures and families whole
    (none holds a "/"). The search text keeps each of those on a line of its own (registry.catalog.columns), so
    ``q`` is shown where it lies on a line starting with ``hf://``, or, holding no "/", where no "/" follows it
    on its line. No second column (that would need a migration and a second index): the substring condition
    stays, so PostgreSQL's trigram index still finds the candidates, and the pattern only rechecks those rows.
    """
    lit = _literal(q)
    hub = f"(^|\n)(?=hf://)[^\n]*{lit}"  # real newlines: both dialects read them as themselves
    pattern = hub if "/" in q else f"{hub}|{lit}[^/\n]*(\n|$)"
    return Q(search_text__contains=q) & Q(search_text__regex=pattern)


def search_hooks() -> list[Callable[[str], Q | None]]:
    """Functions of the search text that return a condition adding pairs to the search (or None), named by dotted
    path in ``SPECREG_TABLE_SEARCH_HOOKS``: apps above the table (the team app's notes) plug in there, so the table
    imports none of them."""
    return all_named("SPECREG_TABLE_SEARCH_HOOKS")


def filtered_pairs(tq: TableQuery) -> QuerySet[Pair]:
    """The table's pairs, filtered, in no order, from the pair table alone (every filter has an index)."""
    qs = Pair.objects.all()
    if tq.verdict == "usable":
        qs = qs.filter(compatible=True)
    elif tq.verdict in ("compatible", "partial"):
        qs = qs.filter(compatible=True, verdict=tq.verdict)
    elif tq.verdict == "incompatible":
        qs = qs.filter(compatible=False)
    elif tq.verdict == "adaptable":
        qs = qs.filter(adaptable_rows())
    if tq.q:
        # A trigram index on PostgreSQL (migration 0005) answers the substring search. Text spanning
        # two fields cannot match (fields are joined by newlines), as when each was searched alone.
        # Pairs other apps find for the text are added (search_hooks: the team app finds pairs whose
        # target, draft, pair or runs carry a note with it).
        q = tq.q.lower()
        if "\n" in q:
            qs = qs.none()
        else:
            # A viewer who may not see server paths matches only what they are shown (shown_search).
            found = Q(search_text__contains=q) if tq.search_paths else shown_search(q)
            for hook in search_hooks():
                more = hook(tq.q)
                if more is not None:
                    found |= more
            qs = qs.filter(found)
    if tq.filters_results:
        qs = qs.filter(pk__in=pairs_with_results(**tq.result_filters))
    elif tq.min_speedup is not None:
        qs = qs.filter(speedup_at_least(tq.min_speedup))
    return qs


def speedup_at_least(x: float) -> Q:
    # Compared through the default order's key (NULL as LOW_FLOAT), so the same index bounds the
    # range; for x above LOW_FLOAT that is the same condition as best_speedup >= x.
    if x <= LOW_FLOAT:
        return Q(best_speedup__gte=x)
    return Q(GreaterThanOrEqual(sort_key("-speedup").expressions[0], x))
