"""Executing one benchmark run: claim it, fetch the models, sweep, store; always leaves it finished.

The Celery task and ``run_benchmark --here`` both call ``execute``: one code path, one run record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from django.db.models import F
from django.utils import timezone

from inspector.hub_names import hub_access
from inspector.sources import is_remote
from inspector.spec_flags import Setting
from registry.access.policy import may_use_server_token
from registry.models import BenchmarkRun, GGUFFile
from runner.hardware import detect, gpu_layers, hardware_class
from runner.llama import binaries, procs
from runner.methods import settings_for
from runner.predict.prediction import PredictionCancelled, PredictionRun
from runner.predict.replay import ReplayError
from runner.predict.runs import MEASURE_BEST, best_to_measure, predictable_settings, run_p_mins, run_prediction
from runner.predict.runs import summary as prediction_summary
from runner.prompts import TaskSetError, load_task_set, parse_task_set
from runner.runs.downloads import DownloadError, local_paths
from runner.runs.execute_soak import execute_soak
from runner.runs.heartbeat import Reporter
from runner.runs.records import claim, log
from runner.runs.store import store_results
from runner.sweep.sweep import SweepConfig, run_sweep

STOPPED = "cancelled: the worker was stopped (SIGTERM/SIGINT) while this run was running; queue it again"


def execute(run_id: int, echo: Callable[[str], None] | None = None) -> str:
    """Run a queued benchmark to the end; always leaves the run finished. Returns its status.

    ``echo``: where a run executed in a terminal prints each step and progress message as it happens."""
    if not claim(run_id):
        return BenchmarkRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    reporter = Reporter(run_id, echo)
    try:
        with hub_access(server_token=_requester_may_use_token(run_id)):
            status, error = _execute(run_id, reporter)
    except Exception as exc:  # anything unforeseen still ends the run, with a line saying why
        status, error = BenchmarkRun.FAILED, f"internal error: {type(exc).__name__}: {exc}"
    finally:
        reporter.stop()
    if procs.SHUTDOWN.is_set() and status != BenchmarkRun.DONE:
        status, error = BenchmarkRun.CANCELLED, STOPPED
    BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.RUNNING).update(
        status=status,
        error=error or "",
        finished_at=timezone.now(),
        progress=1.0 if status == BenchmarkRun.DONE else F("progress"),
        progress_message="",  # what the last step said while running: stale once the status says how it ended
    )
    if error:
        log(run_id, error)
    return status


def _requester_may_use_token(run_id: int) -> bool:
    """Downloads use the server's token for runs queued on the command line (no requester) and for users
    allowed to use it; a run another signed-in user queued downloads only public files."""
    run = BenchmarkRun.objects.select_related("requested_by").get(pk=run_id)
    return run.requested_by is None or may_use_server_token(run.requested_by)


def _execute(run_id: int, reporter: Reporter) -> tuple[str, str | None]:
    run = BenchmarkRun.objects.select_related(
        "pair__target", "pair__draft", "target_file", "draft_file", "requested_by"
    ).get(pk=run_id)
    pair, p = run.pair, run.params
    try:
        build = binaries.build_info()
        server_caps = binaries.capabilities(binaries.find_binary(binaries.SERVER))
    except (binaries.LlamaCppNotFound, binaries.LlamaCppError) as exc:
        return BenchmarkRun.FAILED, str(exc)
    hw = detect(build.backend)
    hw["llama_isa"] = build.isa  # stored with every figure: builds of different instruction sets differ
    BenchmarkRun.objects.filter(pk=run_id).update(
        hardware=hw, hardware_class=hardware_class(hw), build={**asdict(build), "label": build.label}
    )
    reporter.step(
        f"llama.cpp {build.label} ({build.isa or 'instruction set unknown'}) on {hw.get('cpu_model', '?')}; pair {pair}"
    )
    alone = bool(p.get("target_alone"))
    try:
        target_path = _fetch(reporter, run, run.measured_target, (0.0, 0.05 if not alone else 0.1))
        draft_path = "" if alone else _fetch(reporter, run, run.measured_draft, (0.05, 0.1))
    except DownloadError as exc:
        return BenchmarkRun.FAILED, str(exc)
    if reporter.should_cancel():
        return BenchmarkRun.CANCELLED, "cancelled"
    try:
        task_set = parse_task_set(p["task_set"], "task set") if p.get("task_set") else load_task_set()
    except TaskSetError as exc:
        return BenchmarkRun.FAILED, str(exc)
    if run.kind == BenchmarkRun.SOAK:
        gpu = gpu_layers(hw)
        return execute_soak(run, str(target_path), draft_path or None, task_set, hw, build, reporter, server_caps, gpu)
    if run.kind == BenchmarkRun.PREDICT:
        return _predict_only(run, str(target_path), draft_path or None, task_set, hw, build, reporter)
    first: dict[str, Any] | None = None
    by_type = None
    share = 0.1
    # Predicting first pays only when it spares measurements: with no more settings than a predicted sweep measures
    # anyway (MEASURE_BEST per content type), every one is measured and the prediction would only cost its time.
    if not p.get("full_sweep") and 0.0 in p["temperatures"] and len(predictable_settings(p)[0]) > MEASURE_BEST:
        n = len(predictable_settings(p)[0])
        reporter.step(f"predicting {n} settings first, to measure only the best {MEASURE_BEST} per content type")
        first, by_type = _predict_first(run, str(target_path), draft_path or None, task_set, hw, build, reporter)
        share = 0.3
        if reporter.should_cancel():
            return BenchmarkRun.CANCELLED, "cancelled"
    config = SweepConfig(
        target=str(target_path),
        draft=str(draft_path),
        task_set=task_set,
        content_types=tuple(p["content_types"]) if p.get("content_types") else None,
        temperatures=tuple(p["temperatures"]),
        ks=tuple(p["ks"]),
        extend=bool(p.get("extend", True)),
        prompts_per_type=p.get("prompts_per_type"),
        n_predict=p["n_predict"],
        repeats=p["repeats"],
        p_min=p.get("p_min"),
        threads=p.get("threads"),
        methods=tuple(p.get("methods") or ("draft-simple",)),
        p_mins=tuple(p.get("p_mins") or (None,)),
        via=p.get("via") or "cli",
        gpu_layers=gpu_layers(hw),
        timeout_s=float(p.get("timeout_s", 900)),
        settings_by_type=by_type,
        clients=tuple(p.get("clients") or (1,)),
        parallel=p.get("parallel"),
    )

    def progress(fraction: float, message: str) -> None:
        reporter.progress(share + (1 - share) * fraction, message)

    reporter.step("measuring: each setting against plain decoding, interleaved")
    result = run_sweep(config, progress=progress, should_cancel=reporter.should_cancel)
    reporter.step(f"measured {len(result.cells)} cells in {result.elapsed_s:.0f} s: {result.status}")
    if first is not None:
        first["saved_s"] = _time_saved(result, first)
    store_results(run, result, build, hw, server_caps, prediction=first)
    if result.status == "cancelled":
        return BenchmarkRun.CANCELLED, "cancelled"
    if result.status != "ok":
        return BenchmarkRun.FAILED, result.error or "the benchmark failed"
    return BenchmarkRun.DONE, None


# Why a prediction can fail: the tool, llama.cpp or a model file (PredictionCancelled, a ReplayError, comes first).
PREDICTION_FAILED = (ReplayError, binaries.LlamaCppNotFound, binaries.LlamaCppError, OSError)


def _predict(
    run: BenchmarkRun,
    target: str,
    draft: str | None,
    task_set: Any,
    hw: dict,
    build: Any,
    reporter: Reporter,
    *,
    share: float,
) -> PredictionRun:
    """The run's prediction, its progress drawn over ``share`` of the bar after the downloads' tenth."""
    return run_prediction(
        run,
        target,
        draft,
        task_set,
        hw,
        build,
        progress=lambda f, m: reporter.progress(0.1 + share * f, m),
        should_cancel=reporter.should_cancel,
    )


def _predict_only(
    run: BenchmarkRun, target: str, draft: str | None, task_set: Any, hw: dict, build: Any, reporter: Reporter
) -> tuple[str, str | None]:
    """A prediction run: every predictable setting predicted and stored, nothing measured."""
    _, skipped = predictable_settings(run.params)
    try:
        prun = _predict(run, target, draft, task_set, hw, build, reporter, share=0.9)
    except PredictionCancelled:
        return BenchmarkRun.CANCELLED, "cancelled"
    except PREDICTION_FAILED as exc:
        return BenchmarkRun.FAILED, f"prediction failed: {exc}"
    summary = {"mode": "predict", "prediction": prediction_summary(prun, skipped)}
    BenchmarkRun.objects.filter(pk=run.pk).update(summary=summary)
    for ctype, b in prun.best().items():
        log(run.pk, f"{ctype}: best predicted {b['setting']} at {b['speedup']:.2f}x")
    return BenchmarkRun.DONE, None


def _predict_first(
    run: BenchmarkRun, target: str, draft: str | None, task_set: Any, hw: dict, build: Any, reporter: Reporter
) -> tuple[dict[str, Any] | None, dict[str, tuple[Setting, ...]] | None]:
    """A benchmark's first step: predict every setting, then measure only the best ones per content type (and
    every setting of a method that cannot be predicted). A prediction that fails leaves the full sweep."""
    p = run.params
    _, skipped = predictable_settings(p)
    try:
        prun = _predict(run, target, draft, task_set, hw, build, reporter, share=0.2)
    except PredictionCancelled:
        return None, None
    except PREDICTION_FAILED as exc:
        reporter.step(f"prediction failed, so every setting is measured: {exc}")
        return None, None
    reporter.step(f"prediction finished in {sum(prun.seconds.values()):.0f} s")
    others = tuple(s for m in skipped for s in settings_for(m, list(p["ks"]), run_p_mins(p)))
    chosen = {t: (*best, *others) for t, best in best_to_measure(prun).items()}
    for t, settings in chosen.items():
        reporter.step(f"{t}: measuring the predicted best {', '.join(s.label for s in settings)}")
    out = prediction_summary(prun, skipped)
    out["measured"] = {t: [s.label for s in v] for t, v in chosen.items()}
    out["predicted_cells"] = len(prun.predictions)
    return out, chosen


def _time_saved(result: Any, first: dict[str, Any]) -> float | None:
    """Benchmark time the prediction saved: the settings it spared at the measured cells' mean time, less its own."""
    timed = [c.process_s for c in result.cells if c.process_s]
    if not timed:
        return None
    spared = first["predicted_cells"] * len(result.config.temperatures) - len(result.cells)
    return round(max(0, spared) * sum(timed) / len(timed) - sum(first["seconds"].values()), 1)


def _fetch(reporter: Reporter, run: BenchmarkRun, f: GGUFFile, share: tuple[float, float]) -> Any:
    """The file's local path; a download is the run's requester's, within their quota in the model folder."""
    lo, hi = share

    def report(done: int, total: int | None) -> None:
        if total:
            reporter.progress(
                lo + (hi - lo) * done / total, f"downloading {f.filename}: {done / 1e6:.0f} of {total / 1e6:.0f} MB"
            )

    if is_remote(f.source):
        reporter.step(f"fetching {f.source} ({(f.size or 0) / 1e6:.0f} MB) unless already downloaded")
    paths = local_paths(f.source, f.size, f.etag, report, owner=run.requested_by)
    return paths[0]
