"""The pairs table's query string read into a ``TableQuery``: search text, filters, sort and page, each checked;
a parameter that cannot be used is refused (``TableQueryError``) or turned off, never read as another."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from django.http import QueryDict

from registry.sort_keys import COLUMNS

PAGE_SIZE = 50
MAX_PAGE = 1_000_000  # keeps OFFSET within any database's integers
MAX_CLIENTS = 32767  # BenchmarkResult.clients is a PositiveSmallIntegerField
# The verdict filter, in the words of the verdict itself (Pair.verdict: compatible, partial, incompatible over every
# combination of the two models' tokenizer classes, registry.catalog.combinations), with what it is called in the menu.
VERDICTS = {
    "usable": "compatible or partial",  # at least one combination works: the default
    "compatible": "compatible (every quant)",
    "partial": "partial (some quants)",
    "incompatible": "incompatible",
    "adaptable": "adaptable (adapt_draft can fix it)",
    "any": "any verdict",
}
DEFAULT_VERDICT = "usable"
# Older links and API clients: "all" was the filter's word for any verdict (it is not a verdict).
VERDICT_ALIASES = {"all": "any"}
SORTS = {name: column for name, (column, _, _) in COLUMNS.items()}  # ?sort= name (or "-name") -> column


class TableQueryError(ValueError):
    """A table parameter that cannot be used; the message is one line."""


@dataclass
class TableQuery:
    q: str = ""
    verdict: str = DEFAULT_VERDICT
    content_type: str = ""
    hardware: str = ""
    build: str = ""
    min_speedup: float | None = None
    method: str = ""  # llama.cpp's --spec-type of the results, e.g. ngram-mod
    clients: int | None = None  # concurrent clients of measured results (runner.measure.load); None: any
    sort: str = "-speedup"
    page: int = 1  # with a cursor: the number shown; alone: read by OFFSET (old links, typed numbers)
    after: str = ""  # keyset cursors (registry.table.keyset): the page after or before this row
    before: str = ""
    # Whether the viewer may see server paths (registry.access.policy.may_see_paths): set from the request, never
    # from a parameter, and never written into links (params()). Without it the search matches only what the
    # viewer is shown (shown_search), so a local file's folders cannot be recovered by searching letter by letter.
    search_paths: bool = field(default=False, metadata={"param": False})

    @classmethod
    def from_params(cls, params: QueryDict, *, search_paths: bool = False) -> TableQuery:
        def text(name: str, limit: int = 200) -> str:
            return params.get(name, "").strip()[:limit]

        raw = text("min_speedup", 40)
        try:
            min_speedup = float(raw) if raw else None
        except ValueError:
            min_speedup = None  # not a number at all: the filter is off, as for the other bad parameters
        if min_speedup is not None and not math.isfinite(min_speedup):
            # Refused, not dropped: a filter that silently does nothing misleads, and NaN is not JSON.
            raise TableQueryError(f"min_speedup: expected a finite number such as 1.5, got {raw!r}")
        try:
            page = min(MAX_PAGE, max(1, int(params.get("page", "1"))))
        except ValueError:
            page = 1
        try:
            clients: int | None = int(text("clients", 8)) or None
        except ValueError:
            clients = None
        if clients is not None and not 1 <= clients <= MAX_CLIENTS:
            clients = None  # no result has such a concurrency: off, as for the other bad parameters
        sort = text("sort", 20)
        if sort.lstrip("-") not in SORTS:
            sort = "-speedup"
        verdict = text("verdict", 20) or DEFAULT_VERDICT
        verdict = VERDICT_ALIASES.get(verdict, verdict)
        if verdict not in VERDICTS:
            # Refused, not replaced: a filter silently read as another shows rows the user did not ask for.
            raise TableQueryError(f"verdict: expected one of {', '.join(VERDICTS)}, got {verdict!r}")
        return cls(
            q=text("q"),
            verdict=verdict,
            content_type=text("content_type", 32),
            hardware=text("hardware"),
            build=text("build", 32),
            min_speedup=min_speedup,
            method=text("method", 32),
            clients=clients,
            sort=sort,
            page=page,
            after=text("after", 1000),
            before="" if params.get("after") else text("before", 1000),
            search_paths=search_paths,
        )

    @property
    def viewer(self) -> str:
        """What the viewer may see, as cached pages and counts are keyed (registry.cache_keys.cached): the same
        query finds other pairs for a viewer who may see server paths ("paths") than for one who may not ("public")."""
        return "paths" if self.search_paths else "public"

    @property
    def result_filters(self) -> dict[str, Any]:
        return {
            "content_type": self.content_type,
            "hardware": self.hardware,
            "build": self.build,
            "min_speedup": self.min_speedup,
            "method": self.method,
            "clients": self.clients,
        }

    @property
    def filters_results(self) -> bool:
        """Whether the filters look inside results (then rows show the best *matching* result)."""
        return bool(self.content_type or self.hardware or self.build or self.method) or self.clients is not None

    def params(self, **override: Any) -> dict[str, str]:
        """Query parameters for a link to this table with some values changed (defaults left out).

        A link that changes the page, the sort or a filter drops the cursors unless it sets one.
        """
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("param", True)}
        if override.keys() - {"after", "before"}:
            values |= {"after": "", "before": ""}
        values |= override
        default = TableQuery()
        return {k: str(v) for k, v in values.items() if v not in (None, "") and v != getattr(default, k)}
