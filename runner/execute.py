"""Executing one benchmark run: claim it, fetch the models, sweep, store; always leaves it finished.

The Celery task and ``run_benchmark --here`` both call ``execute``: one code path, one run record.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.db.models import F
from django.utils import timezone

from inspector.hub_names import hub_access
from inspector.llama_flags import ALL_GPU_LAYERS
from inspector.sources import is_remote
from registry.access.policy import may_use_server_token
from registry.models import BenchmarkRun, GGUFFile

from . import llamacpp, procs
from .downloads import DownloadError, local_paths
from .hardware import detect, hardware_class
from .heartbeat import Reporter
from .prompts import TaskSetError, load_task_set, parse_task_set
from .runs import claim, log
from .store import store_results
from .sweep import SweepConfig, run_sweep

STOPPED = "cancelled: the worker was stopped (SIGTERM/SIGINT) while this run was running; queue it again"


def execute(run_id: int) -> str:
    """Run a queued benchmark to the end; always leaves the run finished. Returns its status."""
    if not claim(run_id):
        return BenchmarkRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    reporter = Reporter(run_id)
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
    run = BenchmarkRun.objects.select_related("pair__target", "pair__draft").get(pk=run_id)
    pair, p = run.pair, run.params
    hw = detect()
    try:
        build = llamacpp.build_info()
        server_caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SERVER))
    except (llamacpp.LlamaCppNotFound, llamacpp.LlamaCppError) as exc:
        return BenchmarkRun.FAILED, str(exc)
    hw["llama_isa"] = build.isa  # stored with every figure: builds of different instruction sets differ
    BenchmarkRun.objects.filter(pk=run_id).update(
        hardware=hw, hardware_class=hardware_class(hw), build={**asdict(build), "label": build.label}
    )
    log(
        run_id,
        f"llama.cpp {build.label} ({build.isa or 'instruction set unknown'}) on {hw.get('cpu_model', '?')}; "
        f"pair {pair}",
    )
    alone = bool(p.get("target_alone"))
    try:
        target_path = _fetch(run_id, reporter, pair.target, (0.0, 0.05 if not alone else 0.1))
        draft_path = "" if alone else _fetch(run_id, reporter, pair.draft, (0.05, 0.1))
    except DownloadError as exc:
        return BenchmarkRun.FAILED, str(exc)
    if reporter.should_cancel():
        return BenchmarkRun.CANCELLED, "cancelled"
    try:
        task_set = parse_task_set(p["task_set"], "task set") if p.get("task_set") else load_task_set()
    except TaskSetError as exc:
        return BenchmarkRun.FAILED, str(exc)
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
        gpu_layers=ALL_GPU_LAYERS if hw.get("gpus") else None,
        timeout_s=float(p.get("timeout_s", 900)),
    )

    def progress(fraction: float, message: str) -> None:
        reporter.progress(0.1 + 0.9 * fraction, message)

    result = run_sweep(config, progress=progress, should_cancel=reporter.should_cancel)
    store_results(run, result, build, hw, server_caps)
    if result.status == "cancelled":
        return BenchmarkRun.CANCELLED, "cancelled"
    if result.status != "ok":
        return BenchmarkRun.FAILED, result.error or "the benchmark failed"
    return BenchmarkRun.DONE, None


def _fetch(run_id: int, reporter: Reporter, f: GGUFFile, share: tuple[float, float]) -> Any:
    lo, hi = share

    def report(done: int, total: int | None) -> None:
        if total:
            reporter.progress(
                lo + (hi - lo) * done / total, f"downloading {f.filename}: {done / 1e6:.0f} of {total / 1e6:.0f} MB"
            )

    if is_remote(f.source):
        log(run_id, f"fetching {f.source} ({(f.size or 0) / 1e6:.0f} MB) unless already downloaded")
    paths = local_paths(f.source, f.size, f.etag, report)
    return paths[0]
