"""Storing a finished sweep: every cell as a measured result, the recommendations and the deploy artifacts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction

from registry.models import BenchmarkResult, BenchmarkRun
from registry.results.deploy import Deployment, deployment, model_path
from registry.results.figures import refresh_best
from runner.hardware import figure_label
from runner.llama import binaries
from runner.measure.cells import CellResult
from runner.runs.records import log
from runner.sweep.report import markdown_report
from runner.sweep.sweep import SweepResult


def _load_fields(c) -> dict[str, Any]:
    """A cell measured under several clients: its latencies, identity share and label (runner.measure.load)."""
    if c.load is None:
        return {}
    return {
        "latency_p50": c.load.latency_p50,
        "latency_p95": c.load.latency_p95,
        "baseline_latency_p95": c.load.baseline_latency_p95,
        "ttft_p50": c.load.ttft_p50,
        "differing_share": c.load.differing_share,
        "prompt_repeats": c.load.prompt_repeats,
    }


def store_results(
    run: BenchmarkRun,
    result: SweepResult,
    build: binaries.Build,
    hw: dict,
    server_caps,
    *,
    prediction: dict | None = None,
) -> None:
    """Save every cell as a measured result, the recommendations and the deployment artifacts."""
    label = figure_label(hw)
    rows = [_result_row(run, c, label, build) for c in result.cells]
    summary = _summary(result, prediction)
    deploy = _deploy(run, result, hw, server_caps)
    summary["deploy_for"] = deploy.for_type
    summary["deploy_clients"] = deploy.clients
    report = markdown_report(result, hardware=hw, build=build, deployments=deploy.by_type, prediction=prediction)
    with transaction.atomic():
        BenchmarkResult.objects.bulk_create(rows)
        BenchmarkRun.objects.filter(pk=run.pk).update(
            summary=summary, report_md=report, server_command=deploy.chosen.command, systemd_unit=deploy.chosen.unit
        )
    refresh_best(run.pair)


def _result_row(run: BenchmarkRun, c: CellResult, label: str, build: binaries.Build) -> BenchmarkResult:
    """One cell as a measured result (not saved yet); a failed process of it is logged on the run."""
    failed_runs = [r for r in c.runs if r.error]
    if failed_runs:
        log(run.pk, f"{c.cell.setting.label} {c.cell.content_type}: {failed_runs[0].error}")
    return BenchmarkResult(
        run=run,
        pair=run.pair,
        k=c.cell.k,
        method=c.cell.method,
        options=[list(o) for o in c.cell.options],
        content_type=c.cell.content_type,
        temperature=c.cell.temperature,
        p_min=c.cell.p_min,
        n_predict=c.cell.n_predict,
        repeats=c.cell.repeats,
        n_prompts=len(c.cell.prompts),
        status=c.status,
        error=c.error or "",
        speculation_ran=c.speculation_ran,
        acceptance=c.acceptance_rate,
        speedup=c.speedup,
        tokens_per_second=c.spec.median if c.spec else None,
        tps_min=c.spec.min if c.spec else None,
        tps_max=c.spec.max if c.spec else None,
        baseline_tokens_per_second=c.plain.median if c.plain else None,
        baseline_min=c.plain.min if c.plain else None,
        baseline_max=c.plain.max if c.plain else None,
        drafted=c.n_drafted,
        accepted=c.n_accept,
        mean_accepted=c.mean_accepted_per_verification,
        identical=c.identical,
        divergences=[asdict(d) for d in c.divergences],
        other_cpu_share=c.other_cpu_share,
        hardware=label,
        llama_cpp_build=build.label[:32],
        via=c.cell.via,
        speedup_min=c.pair_speedups.min if c.pair_speedups else None,
        speedup_max=c.pair_speedups.max if c.pair_speedups else None,
        pairs=c.pair_speedups.n if c.pair_speedups else None,
        clients=c.cell.clients,
        parallel=c.cell.slots,
        **_load_fields(c),
    )


def _summary(result: SweepResult, prediction: dict | None) -> dict[str, Any]:
    """The run's outcome, its recommendations and where its time went (llama.cpp processes or overhead)."""
    process_s = sum(c.process_s for c in result.cells)
    summary: dict[str, Any] = {
        "status": result.status,
        "error": result.error,
        "notes": list(result.prompt_notes),
        "recommendations": [asdict(r) for r in result.recommendations],
        "elapsed_s": result.elapsed_s,
        "process_s": process_s,
        "overhead_pct": 100 * (result.elapsed_s - process_s) / result.elapsed_s if result.elapsed_s else None,
    }
    if prediction is not None:
        summary["prediction"] = prediction  # what was predicted first, measured after, and the time it saved
    return summary


@dataclass(frozen=True)
class _Deploy:
    """The deployment per content type, and the one the run stores as its server command."""

    by_type: dict[str, Deployment]
    chosen: Deployment
    for_type: str | None  # the content type whose setting ``chosen`` deploys (None: no recommendation)
    clients: int  # the concurrency it holds for


def _deploy(run: BenchmarkRun, result: SweepResult, hw: dict, server_caps) -> _Deploy:
    """The server command and unit per content type at the largest concurrency measured, and the one deployed."""
    gpu = bool(hw.get("gpus"))
    # The files as a user will have them (models/… from the Hub, or the registered path), not this
    # worker's cache paths, so the command is the one the pair page shows.
    target, draft = model_path(run.measured_target), model_path(run.measured_draft)
    # The deployment holds for the largest concurrency measured (production serves several clients at once), with
    # the slots it was measured with (-np): what is deployed is what was measured.
    clients = max((r.clients for r in result.recommendations), default=1)
    at_load = [r for r in result.recommendations if r.clients == clients]
    deployments = {
        r.content_type: deployment(server_caps, target, draft, r.k, gpu=gpu, setting=r.setting, parallel=r.parallel)
        for r in at_load
    }
    # One server serves every content type: deploy the setting of the type with the best speed-up.
    best = max(at_load, key=lambda r: (r.use_draft, r.speedup or 0), default=None)
    slots = best.parallel if best else run.params.get("parallel") or 1
    dep = (
        deployments[best.content_type] if best else deployment(server_caps, target, None, None, gpu=gpu, parallel=slots)
    )
    return _Deploy(deployments, dep, best.content_type if best else None, clients)
