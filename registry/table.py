"""The pairs table: search, filters, sorting and paging from query parameters, shared by page, API and CSV."""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, Q, QuerySet
from django.http import QueryDict

from .cache_keys import TTL, cached
from .models import GGUFFile, Pair, ReportedResult
from .results import Figure, best, figures_for, pairs_with_results, usable_measured

PAGE_SIZE = 50
VERDICTS = {"compatible": "compatible", "incompatible": "incompatible", "all": "all"}
SORTS = {
    "speedup": "best_speedup", "acceptance": "best_acceptance", "k": "best_k", "ratio": "size_ratio",
    "target": "target_name", "draft": "draft_name", "checked": "checked_at",
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


def matching_files(q: str) -> list[int]:
    """Ids of files whose source, model, family or architecture mention ``q``."""
    return list(GGUFFile.objects.filter(
        Q(source__icontains=q) | Q(model__name__icontains=q) | Q(architecture__icontains=q)
        | Q(model__family__name__icontains=q)
    ).values_list("pk", flat=True))


def ordered_pairs(tq: TableQuery) -> QuerySet[Pair]:
    """The table's pairs, filtered and sorted, from the pair table alone (no joins)."""
    qs = Pair.objects.all()
    if tq.verdict == "compatible":
        qs = qs.filter(compatible=True)
    elif tq.verdict == "incompatible":
        qs = qs.filter(compatible=False)
    if tq.q:
        # Evaluated once here: as a subquery PostgreSQL would run it once for each side.
        ids = cached("files", tq.q.lower(), lambda: matching_files(tq.q))
        qs = qs.filter(Q(target_id__in=ids) | Q(draft_id__in=ids))
    if tq.filters_results:
        key = repr(sorted(tq.result_filters.items()))
        qs = qs.filter(pk__in=cached("with-results", key, lambda: pairs_with_results(**tq.result_filters)))
    elif tq.min_speedup is not None:
        qs = qs.filter(best_speedup__gte=tq.min_speedup)
    return qs.order_by(*order_for(tq.sort))


def order_for(sort: str) -> list:
    """ORDER BY terms matching one of migration 0002's indexes exactly (so no sort is needed)."""
    field = SORTS[sort.lstrip("-")]
    if sort == "-speedup":  # the default: among equal speedups (and untested pairs) the biggest ratio first
        return [F(field).desc(nulls_last=True), F("size_ratio").desc(nulls_last=True), "pk"]
    return [F(field).desc(nulls_last=True) if sort.startswith("-") else F(field).asc(nulls_last=True), "pk"]


FILE_COLUMNS = ("source", "repo", "architecture", "parameter_count", "file_type", "n_vocab", "vocab_type", "model__name")


def with_files(qs: QuerySet[Pair]) -> QuerySet[Pair]:
    # Only the columns a row shows: the stored inspections are kilobytes of JSON per file.
    files = [f"{side}__{c}" for side in ("target", "draft") for c in FILE_COLUMNS]
    return qs.select_related("target__model", "draft__model").only(
        "target", "draft", "compatible", "llama_cpp_compatible", "failed_rule", "rules_from", "checked_at",
        "size_ratio", "best_kind", "best_speedup", "best_k", "best_acceptance", "best_content_type", *files)


def pairs(tq: TableQuery) -> QuerySet[Pair]:
    return with_files(ordered_pairs(tq))


class CountedPaginator(Paginator):
    def __init__(self, object_list, per_page: int, count: int) -> None:
        super().__init__(object_list, per_page)
        self._known_count = count

    @property
    def count(self) -> int:
        return self._known_count


@dataclass
class Row:
    pair: Pair
    best: Figure | None

    @cached_property
    def view(self) -> dict[str, str]:
        """Display strings, formatted once here: the template then only looks them up (it is the hot path)."""
        p, b = self.pair, self.best
        speed = "" if not b or b.speedup is None else ("win" if b.speedup > 1 else "loss")
        return {
            "url": f"{PAIR_URL}{p.pk}/",
            "target": p.target.model.name, "target_sub": _file_sub(p.target),
            "draft": p.draft.model.name, "draft_sub": _file_sub(p.draft),
            "ratio": "–" if p.size_ratio is None else f"{p.size_ratio:.1f}×",
            "k": str(b.k) if b and b.k else "–",
            "acceptance": "–" if not b or b.acceptance is None else f"{b.acceptance * 100:.1f}%",
            "speedup": "–" if not b or b.speedup is None else f"{b.speedup:.2f}×", "speed_class": speed,
            "kind": b.kind if b else "", "content_type": b.content_type if b else "",
        }


PAIR_URL = "/pairs/"  # checked against reverse("pair") by a test


def _file_sub(f: GGUFFile) -> str:
    from .templatetags.registry_format import params

    return f"{f.file_type} · {params(f.parameter_count)} · {f.repo or 'local'}"


def page_of(tq: TableQuery) -> tuple[Page, list[Row]]:
    # Sort and cut the page on the narrow pair table first, then join files for those 50 rows
    # only: PostgreSQL would otherwise join all 100,000 pairs before sorting them.
    ordered = ordered_pairs(tq)
    # The count does not depend on page or order: one count serves every page of a filter.
    count = cached("count", repr(sorted(tq.params(page=1, sort="-speedup").items())), ordered.count)
    paginator = CountedPaginator(ordered.values_list("pk", flat=True), PAGE_SIZE, count=count)
    page = paginator.get_page(tq.page)
    ids = list(page.object_list)
    found = with_files(Pair.objects.filter(pk__in=ids)).in_bulk()
    items = [found[pk] for pk in ids]
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


def facets() -> dict[str, list[str]]:
    """Values offered in the filter menus: those that results actually have (cached briefly)."""
    return cached("facets", "", _facets, ttl=max(TTL, 30))


def _facets() -> dict[str, list[str]]:
    out: dict[str, set[str]] = {"content_type": set(), "hardware": set(), "build": set()}
    for qs in (ReportedResult.objects.all(), usable_measured()):
        qs = qs.order_by()  # a model's default ordering would join the DISTINCT
        out["content_type"] |= set(qs.exclude(content_type="").values_list("content_type", flat=True).distinct())
        out["hardware"] |= set(qs.exclude(hardware="").values_list("hardware", flat=True).distinct())
        out["build"] |= set(qs.exclude(llama_cpp_build="").values_list("llama_cpp_build", flat=True).distinct())
    return {k: sorted(v) for k, v in out.items()}
