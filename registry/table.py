"""The pairs table: search, filters, sorting and paging from query parameters, shared by page, API and CSV."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db.models import F, Q, QuerySet
from django.http import QueryDict

from .models import GGUFFile, Pair, ReportedResult
from .results import Figure, best, figures_for, measured_model, pairs_with_results

PAGE_SIZE = 50
VERDICTS = {"compatible": "compatible", "incompatible": "incompatible", "all": "all"}
SORTS = {
    "speedup": "best_speedup", "acceptance": "best_acceptance", "k": "best_k", "ratio": "size_ratio",
    "target": "target__model__name", "draft": "draft__model__name", "checked": "checked_at",
}


@dataclass
class TableQuery:
    q: str = ""
    verdict: str = "compatible"
    content_type: str = ""
    hardware: str = ""
    build: str = ""
    min_speedup: float | None = None
    sort: str = "-speedup"
    page: int = 1

    @classmethod
    def from_params(cls, params: QueryDict) -> TableQuery:
        def text(name: str, limit: int = 200) -> str:
            return params.get(name, "").strip()[:limit]

        try:
            min_speedup = float(params["min_speedup"]) if params.get("min_speedup", "").strip() else None
        except ValueError:
            min_speedup = None
        try:
            page = max(1, int(params.get("page", "1")))
        except ValueError:
            page = 1
        sort = text("sort", 20)
        if sort.lstrip("-") not in SORTS:
            sort = "-speedup"
        verdict = text("verdict", 20)
        return cls(q=text("q"), verdict=verdict if verdict in VERDICTS else "compatible",
                   content_type=text("content_type", 32), hardware=text("hardware"), build=text("build", 32),
                   min_speedup=min_speedup, sort=sort, page=page)

    @property
    def result_filters(self) -> dict[str, Any]:
        return {"content_type": self.content_type, "hardware": self.hardware, "build": self.build,
                "min_speedup": self.min_speedup}

    @property
    def filters_results(self) -> bool:
        """Whether the filters look inside results (then rows show the best *matching* result)."""
        return bool(self.content_type or self.hardware or self.build)

    def params(self, **override: Any) -> dict[str, str]:
        """Query parameters for a link to this table with some values changed (defaults left out)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)} | override
        default = TableQuery()
        return {k: str(v) for k, v in values.items() if v not in (None, "") and v != getattr(default, k)}


def matching_files(q: str) -> QuerySet:
    """Files whose source, model, family or architecture mention ``q``."""
    return GGUFFile.objects.filter(
        Q(source__icontains=q) | Q(model__name__icontains=q) | Q(architecture__icontains=q)
        | Q(model__family__name__icontains=q)
    ).values("pk")


def pairs(tq: TableQuery) -> QuerySet[Pair]:
    qs = Pair.objects.all()
    if tq.verdict == "compatible":
        qs = qs.filter(compatible=True)
    elif tq.verdict == "incompatible":
        qs = qs.filter(compatible=False)
    if tq.q:
        ids = matching_files(tq.q)
        qs = qs.filter(Q(target_id__in=ids) | Q(draft_id__in=ids))
    if tq.filters_results:
        qs = qs.filter(pk__in=pairs_with_results(**tq.result_filters))
    elif tq.min_speedup is not None:
        qs = qs.filter(best_speedup__gte=tq.min_speedup)
    field = SORTS[tq.sort.lstrip("-")]
    order = F(field).desc(nulls_last=True) if tq.sort.startswith("-") else F(field).asc(nulls_last=True)
    tiebreak = F("size_ratio").desc(nulls_last=True)
    # The stored inspections and verdicts are kilobytes of JSON per row: the table needs none of them.
    return (qs.select_related("target__model", "draft__model").defer("result", "target__info", "draft__info")
            .order_by(order, tiebreak, "pk"))


@dataclass
class Row:
    pair: Pair
    best: Figure | None


def page_of(tq: TableQuery) -> tuple[Page, list[Row]]:
    paginator = Paginator(pairs(tq), PAGE_SIZE)
    page = paginator.get_page(tq.page)
    items = list(page.object_list)
    overrides: dict[int, Figure | None] = {}
    if tq.filters_results:
        figs = figures_for([p.pk for p in items], **tq.result_filters)
        overrides = {pid: best(f) for pid, f in figs.items()}
    rows = [Row(p, overrides.get(p.pk) if tq.filters_results else stored_best(p)) for p in items]
    return page, rows


def stored_best(p: Pair) -> Figure | None:
    if not p.best_kind:
        return None
    return Figure(p.best_kind, p.best_k or 0, p.best_acceptance, p.best_speedup, p.best_content_type, "", "")


FACETS_TTL = 30  # seconds: a new content type or hardware may take this long to appear in the menus


def facets() -> dict[str, list[str]]:
    """Values offered in the filter menus: those that results actually have (cached briefly)."""
    return cache.get_or_set("registry:facets", _facets, FACETS_TTL)


def _facets() -> dict[str, list[str]]:
    out: dict[str, set[str]] = {"content_type": set(), "hardware": set(), "build": set()}
    sources = [ReportedResult.objects.all()]
    if (m := measured_model()) is not None:
        sources.append(m.objects.all())
    for qs in sources:
        out["content_type"] |= set(qs.exclude(content_type="").values_list("content_type", flat=True).distinct())
        out["hardware"] |= set(qs.exclude(hardware="").values_list("hardware", flat=True).distinct())
        out["build"] |= set(qs.exclude(llama_cpp_build="").values_list("llama_cpp_build", flat=True).distinct())
    return {k: sorted(v) for k, v in out.items()}
