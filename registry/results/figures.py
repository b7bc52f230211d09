"""Results attached to pairs: measured (``BenchmarkResult``), reported and predicted (``PredictedResult``), kept apart.

The runner writes measured results and then calls ``refresh_best(pair)`` so the table shows them; predictions
call ``refresh_predicted(pair)``, which fills the table's own "Predicted" column (never the best result's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models

from registry.cache_keys import bump_generation
from registry.models import BenchmarkResult, Pair, PredictedResult, ReportedResult

FIGURES = (
    "k",
    "method",
    "acceptance",
    "speedup",
    "tokens_per_second",
    "baseline_tokens_per_second",
    "content_type",
    "hardware",
    "llama_cpp_build",
)


@dataclass
class Figure:
    kind: str  # "measured", "reported" or "predicted"
    k: int
    acceptance: float | None
    speedup: float | None
    content_type: str
    hardware: str
    llama_cpp_build: str
    method: str = "draft-simple"  # llama.cpp's --spec-type
    tokens_per_second: float | None = None
    baseline_tokens_per_second: float | None = None
    citation: str = ""
    source_url: str = ""
    # The installation it came from when imported (registry.kb); empty: made here.
    origin: str = ""
    # Measured under load (runner.load): concurrent clients, and then the servers' slots, latencies (s), time to the
    # first token, the share of outputs unlike the single-client plain output, and whether prompts repeated.
    clients: int = 1
    load: dict[str, Any] | None = None
    # Measured: the speedup's range over the interleaved pairs, {"min", "max", "pairs"} (a gain counts beyond it).
    pair_speedups: dict[str, Any] | None = None
    obj: Any = None

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "obj"}
        if self.kind != "reported":
            d.pop("citation"), d.pop("source_url")
        return d


LOAD_FIGURES = (
    "parallel",
    "latency_p50",
    "latency_p95",
    "baseline_latency_p95",
    "ttft_p50",
    "differing_share",
    "prompt_repeats",
)


def _figure(kind: str, r: Any) -> Figure:
    extra: dict[str, Any] = {"citation": r.citation, "source_url": r.source_url} if kind == "reported" else {}
    if kind == "measured":
        extra["clients"] = r.clients
        if r.clients > 1 or r.latency_p95 is not None:
            extra["load"] = {f: getattr(r, f) for f in LOAD_FIGURES}
        if r.speedup_min is not None:
            extra["pair_speedups"] = {"min": r.speedup_min, "max": r.speedup_max, "pairs": r.pairs}
    return Figure(kind, **{f: getattr(r, f) for f in FIGURES}, origin=r.origin_installation or "", obj=r, **extra)


def filtered(
    qs: models.QuerySet,
    content_type: str = "",
    hardware: str = "",
    build: str = "",
    min_speedup: float | None = None,
    method: str = "",
    clients: int | None = None,
) -> models.QuerySet:
    if method:
        qs = qs.filter(method=method)
    if clients is not None:
        if any(f.name == "clients" for f in qs.model._meta.concrete_fields):
            qs = qs.filter(clients=clients)
        elif clients != 1:
            # Reported and predicted figures carry no concurrency: they are one client's, so they match 1 only.
            qs = qs.none()
    if content_type:
        qs = qs.filter(content_type=content_type)
    if hardware:
        qs = qs.filter(hardware__icontains=hardware)
    if build:
        qs = qs.filter(llama_cpp_build=build)
    if min_speedup is not None:
        qs = qs.filter(speedup__gte=min_speedup)
    return qs


def figures_for(pair_ids: list[int], **filters: Any) -> dict[int, dict[str, list[Figure]]]:
    """Every result of these pairs (matching the table's filters), by pair and kind."""
    out: dict[int, dict[str, list[Figure]]] = {
        pid: {"measured": [], "reported": [], "predicted": []} for pid in pair_ids
    }
    # A measured result's provenance is its run's, read in the same query.
    # divergences (text excerpts, large on long runs) are not figures: left unread (import_kb refreshes many pairs)
    measured = usable_measured().defer("divergences").annotate(origin_installation=models.F("run__origin_installation"))
    predicted = latest_predictions(PredictedResult.objects.all()).annotate(
        origin_installation=models.Value("", output_field=models.CharField())
    )
    sources = [("measured", measured), ("reported", ReportedResult.objects.all()), ("predicted", predicted)]
    for kind, qs in sources:
        for r in filtered(qs.filter(pair_id__in=pair_ids), **filters).order_by("content_type", "k"):
            out[r.pair_id][kind].append(_figure(kind, r))
    return out


def usable_measured() -> models.QuerySet:
    # Cells that failed, timed out or were cancelled carry no figures to compare (the pair
    # page's list of runs shows them).
    return BenchmarkResult.objects.filter(status="ok")


def latest_predictions(qs: models.QuerySet) -> models.QuerySet:
    """Only each pair's newest prediction run per hardware class: a prediction made again (a newer build, another
    task set) replaces the older one rather than standing beside it as a second opinion."""
    newest = (
        PredictedResult.objects.filter(
            pair_id=models.OuterRef("pair_id"), hardware_class=models.OuterRef("hardware_class")
        )
        .order_by("-run_id")
        .values("run_id")[:1]
    )
    return qs.filter(run_id=models.Subquery(newest))


def best_predicted(pair: Pair) -> Figure | None:
    figs = figures_for([pair.pk])[pair.pk]["predicted"]
    with_speed = [f for f in figs if f.speedup is not None]
    return max(with_speed, key=lambda f: (f.speedup, f.acceptance or 0)) if with_speed else None


def refresh_predicted(pair: Pair) -> None:
    """Copy the pair's best predicted setting onto it (the table's "Predicted" column and its sort)."""
    b = best_predicted(pair)
    Pair.objects.filter(pk=pair.pk).update(
        predicted_speedup=b.speedup if b else None,
        predicted_k=b.k or None if b else None,
        predicted_method=b.method if b else "",
        predicted_content_type=b.content_type if b else "",
    )
    bump_generation()


def best(figs: dict[str, list[Figure]]) -> Figure | None:
    """The fastest measured result; a reported one only when nothing was measured (never mixed)."""
    for kind in ("measured", "reported"):
        with_speed = [f for f in figs[kind] if f.speedup is not None]
        if with_speed:
            return max(with_speed, key=lambda f: (f.speedup, f.acceptance or 0))
        if figs[kind]:
            return figs[kind][0]
    return None


def refresh_best(pair: Pair) -> None:
    """Copy the pair's best result onto it, so the table can sort and filter without joins."""
    b = best(figures_for([pair.pk])[pair.pk])
    pair.best_kind = b.kind if b else ""
    pair.best_speedup = b.speedup if b else None
    pair.best_k = b.k if b else None
    pair.best_acceptance = b.acceptance if b else None
    pair.best_content_type = b.content_type if b else ""
    pair.best_method = b.method if b else ""
    Pair.objects.filter(pk=pair.pk).update(
        best_kind=pair.best_kind,
        best_speedup=pair.best_speedup,
        best_k=pair.best_k,
        best_acceptance=pair.best_acceptance,
        best_content_type=pair.best_content_type,
        best_method=pair.best_method,
    )
    bump_generation()  # cached table pages, counts and filter menus are out of date


def pairs_with_results(**filters: Any) -> models.QuerySet:
    """Ids of pairs having a result that matches the filters (measured or reported), as a subquery.

    One UNION inside ``pk IN (…)``: PostgreSQL plans it as a semi-join from the (few) matching
    results, where an OR of two subqueries would be checked row by row.
    """
    reported = filtered(ReportedResult.objects.order_by(), **filters).values("pair_id")
    measured = filtered(usable_measured().order_by(), **filters).values("pair_id")
    return reported.union(measured, all=True)
