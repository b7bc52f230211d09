"""Prediction as part of a run: a prediction run (the pair page's "Predict" button, the API; a run of
``kind`` "predict"), and the first step of a benchmark, which predicts every setting and then measures only the best.

runner.predict.prediction computes; this module chooses what to predict from a run's parameters, stores every prediction
as a ``PredictedResult`` (the fourth kind of figure) and picks what a benchmark still needs to measure.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import transaction

from inspector.spec_flags import Setting, uses_draft_file
from registry.models import BenchmarkRun, PredictedResult
from registry.results.figures import refresh_predicted
from runner.hardware import figure_label, measurement_class
from runner.llama import binaries
from runner.methods import GRID, settings_for
from runner.predict.prediction import NOT_YET, Prediction, PredictionRun, predict, predictable
from runner.prompts import TaskSet

MEASURE_BEST = 2  # a predicted sweep measures this many settings per content type (the baseline beside each)


def planned_ks(p: dict[str, Any]) -> list[int]:
    """The Ks a sweep could reach: those asked for and, where it may extend, the grid above them (a prediction
    is cheap enough to cover what the measured sweep would only reach step by step)."""
    ks = set(p["ks"])
    if p.get("extend", True):
        ks |= {g for g in GRID if g > max(ks)}
    return sorted(ks)


def predictable_settings(p: dict[str, Any]) -> tuple[list[Setting], list[str]]:
    """The settings of a run's methods that can be predicted, and the methods that cannot (MTP, EAGLE-3, …)."""
    p_mins = run_p_mins(p)
    methods = p.get("methods") or ["draft-simple"]
    out = [
        s
        for m in methods
        if predictable(m)
        for s in settings_for(m, planned_ks(p), p_mins if uses_draft_file(m) else [None])
    ]
    return out, [m for m in methods if not predictable(m)]


def run_p_mins(p: dict[str, Any]) -> list[float | None]:
    """The p-min values a run sweeps: its one ``p_min`` when given, else its list."""
    return [p["p_min"]] if p.get("p_min") is not None else list(p["p_mins"])


def trimmed_tasks(task_set: TaskSet, types: list[str], per_type: int | None) -> TaskSet:
    return type(task_set)(
        task_set.name,
        task_set.description,
        tuple(t for c in types for t in task_set.by_type(c)[:per_type]),
    )


def run_prediction(
    run: BenchmarkRun,
    target: str,
    draft: str | None,
    task_set: TaskSet,
    hw: dict[str, Any],
    build: binaries.Build,
    *,
    progress: Callable[[float, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> PredictionRun:
    """Predict a run's settings and store them on its pair; raises runner.predict.replay.ReplayError (one line)."""
    p = run.params
    types = list(p.get("content_types") or task_set.content_types)
    settings, _ = predictable_settings(p)
    prun = predict(
        target,
        draft or None,
        settings,
        trimmed_tasks(task_set, types, p.get("prompts_per_type")),
        types,
        n_predict=p["n_predict"],
        threads=p.get("threads"),
        progress=progress,
        should_cancel=should_cancel,
        timeout_s=float(p.get("timeout_s") or 900),
        hardware=hw,  # the benchmark's own description: its GPU layers, and the class the figures are stored under
    )
    store_predictions(run, prun, task_set.name, hw, build)
    return prun


def store_predictions(
    run: BenchmarkRun, prun: PredictionRun, task_set: str, hw: dict[str, Any], build: binaries.Build
) -> None:
    """Every prediction as a PredictedResult of the run's pair; the pair's table column follows."""
    p = run.params
    label = figure_label(hw)
    rows = [
        PredictedResult(
            run=run,
            pair=run.pair,
            k=x.k or 0,
            method=x.method,
            options=[list(o) for o in x.options],
            content_type=x.content_type,
            p_min=x.p_min,
            acceptance=x.acceptance,
            speedup=x.speedup,
            tokens_per_second=x.tokens / x.spec_seconds if x.spec_seconds > 0 else None,
            baseline_tokens_per_second=x.tokens / x.plain_seconds if x.plain_seconds > 0 else None,
            n_predict=p["n_predict"],
            n_prompts=p.get("prompts_per_type") or 0,
            task_set=task_set[:100],
            hardware=label,
            hardware_class=measurement_class(hw)[:64],
            llama_cpp_build=build.label[:32],
            drafted=round(x.drafted),
            accepted=round(x.accepted),
            tokens=round(x.tokens),
            near_ties=x.near_ties,
        )
        for x in prun.predictions
    ]
    with transaction.atomic():
        PredictedResult.objects.bulk_create(rows)
    refresh_predicted(run.pair)


def best_to_measure(prun: PredictionRun, n: int = MEASURE_BEST) -> dict[str, list[Setting]]:
    """Per content type, the ``n`` settings predicted fastest (those with no prediction last, never chosen)."""
    by_type: dict[str, list[Prediction]] = {}
    for x in prun.predictions:
        if x.speedup is not None:
            by_type.setdefault(x.content_type, []).append(x)
    return {t: [x.as_setting for x in sorted(xs, key=lambda x: -(x.speedup or 0.0))[:n]] for t, xs in by_type.items()}


def summary(prun: PredictionRun, not_predictable: list[str]) -> dict[str, Any]:
    """What a run's summary keeps of its prediction (the predictions themselves are PredictedResult rows)."""
    return {
        "best": prun.best(),
        "seconds": {k: round(v, 2) for k, v in prun.seconds.items()},
        "settings": len({x.setting for x in prun.predictions}),
        "not_predictable": [{"method": m, "why": NOT_YET} for m in not_predictable],
        "gpu_layers": prun.offload.gpu_layers if prun.offload is not None else None,
        # the machine's cost model: seconds per batch of 1, 2, … tokens (every token's logits) at that context depth
        "cost_model": {
            name: {"model": Path(c.model).name, "depth": c.depth, "seconds": [round(x, 6) for x in c.seconds]}
            for name, c in prun.costs.items()
        },
    }


def predictions_by_setting(run: BenchmarkRun) -> dict[tuple[str, str], PredictedResult]:
    """The run's predictions by (content type, setting label), to set beside its measured results."""
    return {(x.content_type, x.setting_label): x for x in run.predictions.all()}


def drafted_apart(measured: Any, predicted: PredictedResult | None) -> str | None:
    """Why a measured setting's prediction drafted where the measurement drafted nothing, or the other way round;
    None when they agree on whether anything was drafted (how much is the prediction's error, shown beside it).

    The replay runs llama.cpp's loop over the target's plain greedy text (its transcript), as a speculative run at
    temperature 0 should write it; an n-gram method drafts by looking that text up. A real speculative run decodes in
    other batch shapes, which can break a near-tie the other way (SmolLM2-135M on edit-fix-bug: "total" or "return"
    at character 45, margin 0.22): its text then goes its own way, and the table finds other matches, or none,
    where the plain text repeated the prompt."""
    if predicted is None or measured.status != "ok" or (predicted.drafted > 0) == bool(measured.speculation_ran):
        return None
    replayed = "the prediction replays the target's plain greedy text (its transcript)"
    divergences = measured.divergences or []
    if measured.identical is False and divergences and isinstance(divergences[0], dict):
        ties = f"; the prediction counted {predicted.near_ties} near-ties" if predicted.near_ties else ""
        return (
            f"{replayed}, but the measured speculative run's text parted from it at character "
            f"{divergences[0].get('position')} (see Same output: batches of another shape broke a near-tie the other "
            f"way{ties}), and the drafts look up the text written so far, so each found its own matches"
        )
    return (
        f"{replayed} and the measured run drafts from the text it writes; here both wrote the same text, so they "
        "should agree: this is worth reporting, with the run's log"
    )


# Beyond this many points between predicted and measured acceptance, a row whose texts parted says why.
APART_POINTS = 5.0


def acceptance_apart(measured: Any, predicted: PredictedResult | None) -> str | None:
    """Why a measured acceptance is more than APART_POINTS from its prediction, where the speculative run's text
    parted from the plain one; None otherwise (or where ``drafted_apart`` already explains the row).

    The replay's rounds equal the real run's round by round until the two texts part; from there the real run
    writes another text (batches of another shape broke one of the target's near-ties the other way), and its
    acceptance is that text's. The prediction cannot know which way a near-tie breaks, so this is its limit, said
    beside the figure rather than hidden in an average."""
    if predicted is None or measured.status != "ok" or measured.identical is not False:
        return None
    if predicted.acceptance is None or measured.acceptance is None or drafted_apart(measured, predicted):
        return None
    if abs(100 * (predicted.acceptance - measured.acceptance)) <= APART_POINTS:
        return None
    at = [d.get("position") for d in measured.divergences or [] if isinstance(d, dict)]
    where = min((p for p in at if isinstance(p, int)), default=None)
    ties = f" (the prediction counted {predicted.near_ties} near-ties)" if predicted.near_ties else ""
    return (
        f"predicted {100 * predicted.acceptance:.1f}% accepted over the target's plain text; the measured speculative "
        f"run's text parted from it at character {where}{ties}, and past that point its acceptance is another text's"
    )
