"""Results attached to pairs: measured (``BenchmarkResult``), reported and predicted (``PredictedResult``), kept apart.

The runner writes measured results and then calls ``refresh_best(pair)`` so the table shows them; predictions
call ``refresh_predicted(pair)``, which fills the table's own "Predicted" column (never the best result's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import models

from registry.cache_keys import bump_generation
from registry.models import BenchmarkResult, Pair, PredictedResult, ReportedResult
from registry.results.standing import described, standing_of

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
    # Under load (runner.measure.load): concurrent clients, and then the servers' slots, latencies (s), time to the
    # first token, the share of outputs unlike the single-client plain output, and whether prompts repeated.
    clients: int = 1
    load: dict[str, Any] | None = None
    # Measured: the speedup's range over the interleaved pairs, {"min", "max", "pairs"} (a gain counts beyond it).
    pair_speedups: dict[str, Any] | None = None
    # Measured: "" when the speed-up may be headlined, else why not ("1 repeat", "contended", "no measurable gain":
    # registry.results.standing); reported and predicted figures say how far to trust them by their kind.
    note: str = ""
    obj: Any = None

    @property
    def note_text(self) -> str:
        """The note in words ("no measurable gain: 2.13× in 1 repeat"), "" for a figure that may be headlined."""
        return described(self.note, self.speedup)

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
        extra["note"] = standing_of(kind, r)
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
    predicted = chosen_predictions(pair_ids).annotate(
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


_BUILD_NUMBER = re.compile(r"^b(\d+)\b")


def build_number(label: str) -> int | None:
    """The build number in a label such as "b11434 (abc1234)"; None for labels without one."""
    m = _BUILD_NUMBER.match(label or "")
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class PredictionRunInfo:
    """One prediction run of a pair on one hardware class: what the pair page lists and the Predicted column
    chooses among (``chosen``)."""

    run_id: int
    pair_id: int
    hardware_class: str
    llama_cpp_build: str
    n_prompts: int  # prompts per content type
    n_predict: int  # tokens per prompt
    task_set: str
    created_at: datetime  # the run's
    chosen: bool = False

    @property
    def size(self) -> int:
        return self.n_prompts * self.n_predict

    @property
    def rank(self) -> tuple[bool, int, int, int]:
        """Higher is preferred: the newest llama.cpp build, then the largest run, then the newest run. Builds are
        ordered by number, a label without one (a local build) after them, as registry.results.history does."""
        n = build_number(self.llama_cpp_build)
        return (n is None, n or 0, self.size, self.run_id)


def prediction_runs(pair_ids: list[int]) -> list[PredictionRunInfo]:
    """Every prediction run of these pairs, newest first, the one per (pair, hardware class) that stands for the
    pair marked ``chosen``.

    Not simply the newest run: one person's quick prediction (8 tokens of one prompt) would then replace a full
    one for everyone. Every run stays listed on the pair page; only the chosen one's figures are shown as the
    pair's prediction (the table's column, the pair and model pages). Read from the predictions themselves (a
    run's rows share their build, size and class), one small query.
    """
    rows = (
        PredictedResult.objects.filter(pair_id__in=pair_ids)
        .order_by()
        .values_list(
            "run_id",
            "pair_id",
            "hardware_class",
            "llama_cpp_build",
            "n_prompts",
            "n_predict",
            "task_set",
            "run__created_at",
        )
        .distinct()
    )
    runs: dict[tuple[int, int, str], PredictionRunInfo] = {}
    for row in rows:
        info = PredictionRunInfo(*row)
        key = (info.run_id, info.pair_id, info.hardware_class)
        if key not in runs or info.rank > runs[key].rank:  # rows of one run that differ: its best stands for it
            runs[key] = info
    best: dict[tuple[int, str], PredictionRunInfo] = {}
    for info in runs.values():
        where = (info.pair_id, info.hardware_class)
        if where not in best or info.rank > best[where].rank:
            best[where] = info
    chosen = set(best.values())
    return sorted(
        (replace(x, chosen=x in chosen) for x in runs.values()), key=lambda x: (x.pair_id, -x.run_id, x.hardware_class)
    )


def chosen_predictions(pair_ids: list[int]) -> models.QuerySet:
    """The predictions of each of these pairs' chosen run per hardware class (``prediction_runs``): a prediction
    made again replaces the older one only when it is at least as good a measure of the pair, not beside it as a
    second opinion."""
    chosen = [x.run_id for x in prediction_runs(pair_ids) if x.chosen]
    return PredictedResult.objects.filter(pair_id__in=pair_ids, run_id__in=chosen)


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
    """The fastest measured result that may be headlined (``Figure.note`` empty), else the fastest measured one, which
    then reads as what it is; a reported one only when nothing was measured (never mixed)."""
    for kind in ("measured", "reported"):
        with_speed = [f for f in figs[kind] if f.speedup is not None]
        if with_speed:
            pool = [f for f in with_speed if not f.note] or with_speed
            return max(pool, key=lambda f: (f.speedup, f.acceptance or 0))
        if figs[kind]:
            return figs[kind][0]
    return None


def refresh_best(pair: Pair) -> None:
    """Copy the pair's best result onto it, so the table can sort and filter without joins."""
    b = best(figures_for([pair.pk])[pair.pk])
    pair.best_kind = b.kind if b else ""
    # A figure that may not be headlined neither sorts nor shows as the pair's speed-up: its note says what it is.
    pair.best_speedup = b.speedup if b and not b.note else None
    pair.best_note = b.note_text if b else ""
    pair.best_k = b.k if b else None
    pair.best_acceptance = b.acceptance if b else None
    pair.best_content_type = b.content_type if b else ""
    pair.best_method = b.method if b else ""
    Pair.objects.filter(pk=pair.pk).update(
        best_kind=pair.best_kind,
        best_speedup=pair.best_speedup,
        best_note=pair.best_note,
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
