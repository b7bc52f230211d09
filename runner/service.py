"""Benchmark runs as database records: queue, claim, execute, cancel, and sweep dead workers.

Views, Celery tasks and management commands all call these functions; the tasks only pass ids.
"""
from __future__ import annotations

import os
import socket
import threading
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import F
from django.utils import timezone

from inspector.sources import is_remote
from registry.models import GGUFFile, Pair
from registry.results import refresh_best

from . import deploy, llamacpp
from .downloads import DownloadError, local_paths
from .hardware import detect, hardware_class
from .models import BenchmarkResult, BenchmarkRun
from .prompts import TaskSetError, load_task_set, parse_task_set
from .queues import bench_queue, local_hardware_class
from .sweep import DEFAULT_KS, GRID, SweepConfig, SweepResult, run_sweep

HEARTBEAT_S = 10  # how often a running worker proves it is alive
STALE_AFTER_S = 120  # a running run without a heartbeat this long is declared dead
LOG_LIMIT = 200_000  # characters of log kept per run

DEFAULT_PARAMS: dict[str, Any] = {
    "ks": list(DEFAULT_KS), "content_types": None, "temperatures": [0.0], "repeats": 3, "n_predict": 128,
    "prompts_per_type": 3, "p_min": None, "extend": True, "threads": None, "task_set": None,
    "timeout_s": 900,  # per llama.cpp process; a hung or runaway process is killed with its children
}


class BenchmarkError(Exception):
    """A benchmark cannot be queued or run; one line."""


def normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in and every value checked, so a bad request fails when queued, not hours later."""
    p = {**DEFAULT_PARAMS, **{k: v for k, v in params.items() if v is not None}}
    unknown = set(p) - set(DEFAULT_PARAMS)
    if unknown:
        raise BenchmarkError(f"unknown benchmark parameter(s): {', '.join(sorted(unknown))}")
    ks = sorted({int(k) for k in p["ks"]})
    if not ks or any(k < 1 or k > 64 for k in ks):
        raise BenchmarkError(f"K must be between 1 and 64 (grid: {', '.join(map(str, GRID))}); got {p['ks']}")
    temps = [float(t) for t in p["temperatures"]]
    if not temps or any(t < 0 or t > 2 for t in temps):
        raise BenchmarkError(f"temperatures must lie in [0, 2]; got {p['temperatures']}")
    for name, lo, hi in (("repeats", 1, 20), ("n_predict", 8, 4096), ("prompts_per_type", 1, 50),
                         ("timeout_s", 1, 6 * 3600)):
        if not lo <= int(p[name]) <= hi:
            raise BenchmarkError(f"{name} must be between {lo} and {hi}; got {p[name]}")
    task_set = parse_task_set(p["task_set"], "task set") if p["task_set"] else load_task_set()
    types = p["content_types"] or None
    if types:
        missing = [t for t in types if t not in task_set.content_types]
        if missing:
            raise BenchmarkError(f"content type(s) {', '.join(missing)} not in the task set "
                                 f"(have: {', '.join(task_set.content_types)})")
    return {**p, "ks": ks, "temperatures": temps, "repeats": int(p["repeats"]), "n_predict": int(p["n_predict"]),
            "prompts_per_type": int(p["prompts_per_type"]), "content_types": types, "timeout_s": float(p["timeout_s"])}


def queue_benchmark(pair: Pair, params: dict[str, Any], *, user=None, hardware: str | None = None) -> BenchmarkRun:
    """Record a queued run and send its task once the transaction commits."""
    if not pair.compatible:
        raise BenchmarkError(f"{pair.draft.source} cannot draft for {pair.target.source}: rule "
                             f"'{pair.failed_rule}' fails ({_rule_detail(pair)})")
    params = normalize_params(params)
    hw = hardware or local_hardware_class()
    with transaction.atomic():
        run = BenchmarkRun.objects.create(pair=pair, params=params, queue=bench_queue(hw), hardware_class=hw,
                                          requested_by=user if getattr(user, "is_authenticated", False) else None)
        transaction.on_commit(lambda: _send(run))
    return run


def _rule_detail(pair: Pair) -> str:
    for c in pair.result.get("checks", []):
        if c["rule"] == pair.failed_rule:
            return c["detail"].rstrip(".")
    return "see the pair page"


def _send(run: BenchmarkRun) -> None:
    from .tasks import run_benchmark

    run_benchmark.apply_async(args=[run.pk], queue=run.queue)


def cancel(run_id: int) -> str:
    """Cancel a queued run at once, or ask the worker of a running one to stop; returns the new state."""
    if BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.QUEUED).update(
            status=BenchmarkRun.CANCELLED, finished_at=timezone.now(), error="cancelled before it started"):
        return BenchmarkRun.CANCELLED
    if BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.RUNNING).update(cancel_requested=True):
        return "cancelling"
    run = BenchmarkRun.objects.filter(pk=run_id).first()
    if run is None:
        raise BenchmarkError(f"no benchmark run {run_id}")
    return run.status


def sweep_stale(stale_after_s: int = STALE_AFTER_S) -> int:
    """Fail running runs whose worker stopped sending heartbeats (killed, machine lost)."""
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    return BenchmarkRun.objects.filter(status=BenchmarkRun.RUNNING, heartbeat_at__lt=cutoff).update(
        status=BenchmarkRun.FAILED, finished_at=timezone.now(),
        error=f"the worker stopped responding (no heartbeat for {stale_after_s} s); run it again")


def claim(run_id: int) -> bool:
    """Take a queued run for this worker; False when another worker has it or it was cancelled."""
    now = timezone.now()
    return BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.QUEUED).update(
        status=BenchmarkRun.RUNNING, started_at=now, heartbeat_at=now,
        worker=f"{socket.gethostname()}:{os.getpid()}") == 1


class _Reporter:
    """Heartbeats, progress, log lines and the cancel flag of one running run, throttled."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.cancelled = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._progress: tuple[float, str] | None = None
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self.flush()
            except DatabaseError:
                pass  # a busy or briefly unreachable database: the next beat tries again
        close_old_connections()

    def flush(self) -> None:
        with self._lock:
            pending, self._progress = self._progress, None
        fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
        if pending:
            fields.update(progress=pending[0], progress_message=pending[1][:300])
        BenchmarkRun.objects.filter(pk=self.run_id, status=BenchmarkRun.RUNNING).update(**fields)
        if BenchmarkRun.objects.filter(pk=self.run_id, cancel_requested=True).exists():
            self.cancelled = True

    def progress(self, fraction: float, message: str) -> None:
        with self._lock:
            self._progress = (fraction, message)

    def should_cancel(self) -> bool:
        return self.cancelled

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def log(run_id: int, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    run = BenchmarkRun.objects.get(pk=run_id)
    text = (run.log + f"[{stamp}] {line}\n")[-LOG_LIMIT:]
    BenchmarkRun.objects.filter(pk=run_id).update(log=text)


def execute(run_id: int) -> str:
    """Run a claimed-or-queued benchmark to the end; always leaves the run finished. Returns its status."""
    if not claim(run_id):
        return BenchmarkRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    reporter = _Reporter(run_id)
    try:
        status, error = _execute(run_id, reporter)
    except Exception as exc:  # anything unforeseen still ends the run, with a line saying why
        status, error = BenchmarkRun.FAILED, f"internal error: {type(exc).__name__}: {exc}"
    finally:
        reporter.stop()
    BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.RUNNING).update(
        status=status, error=error or "", finished_at=timezone.now(),
        progress=1.0 if status == BenchmarkRun.DONE else F("progress"))
    if error:
        log(run_id, error)
    return status


def _execute(run_id: int, reporter: _Reporter) -> tuple[str, str | None]:
    run = BenchmarkRun.objects.select_related("pair__target", "pair__draft").get(pk=run_id)
    pair, p = run.pair, run.params
    hw = detect()
    try:
        build = llamacpp.build_info()
        server_caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SERVER))
    except (llamacpp.LlamaCppNotFound, llamacpp.LlamaCppError) as exc:
        return BenchmarkRun.FAILED, str(exc)
    BenchmarkRun.objects.filter(pk=run_id).update(hardware=hw, hardware_class=hardware_class(hw),
                                                  build={**asdict(build), "label": build.label})
    log(run_id, f"llama.cpp {build.label} on {hw.get('cpu_model', '?')}; pair {pair}")
    try:
        target_path, draft_path = (_fetch(run_id, reporter, f, share) for f, share in
                                   ((pair.target, (0.0, 0.05)), (pair.draft, (0.05, 0.1))))
    except DownloadError as exc:
        return BenchmarkRun.FAILED, str(exc)
    if reporter.should_cancel():
        return BenchmarkRun.CANCELLED, "cancelled"
    try:
        task_set = parse_task_set(p["task_set"], "task set") if p.get("task_set") else load_task_set()
    except TaskSetError as exc:
        return BenchmarkRun.FAILED, str(exc)
    config = SweepConfig(
        target=str(target_path), draft=str(draft_path), task_set=task_set,
        content_types=tuple(p["content_types"]) if p.get("content_types") else None,
        temperatures=tuple(p["temperatures"]), ks=tuple(p["ks"]), extend=bool(p.get("extend", True)),
        prompts_per_type=p.get("prompts_per_type"), n_predict=p["n_predict"], repeats=p["repeats"],
        p_min=p.get("p_min"), threads=p.get("threads"),
        gpu_layers=llamacpp.ALL_GPU_LAYERS if hw.get("gpus") else None, timeout_s=float(p.get("timeout_s", 900)),
    )

    def progress(fraction: float, message: str) -> None:
        reporter.progress(0.1 + 0.9 * fraction, message)

    result = run_sweep(config, progress=progress, should_cancel=reporter.should_cancel)
    _store(run, result, build, hw, server_caps, config.target, config.draft)
    if result.status == "cancelled":
        return BenchmarkRun.CANCELLED, "cancelled"
    if result.status != "ok":
        return BenchmarkRun.FAILED, result.error or "the benchmark failed"
    return BenchmarkRun.DONE, None


def _fetch(run_id: int, reporter: _Reporter, f: GGUFFile, share: tuple[float, float]) -> Any:
    lo, hi = share

    def report(done: int, total: int | None) -> None:
        if total:
            reporter.progress(lo + (hi - lo) * done / total, f"downloading {f.filename}: {done / 1e6:.0f} of {total / 1e6:.0f} MB")

    if is_remote(f.source):
        log(run_id, f"fetching {f.source} ({(f.size or 0) / 1e6:.0f} MB) unless already downloaded")
    paths = local_paths(f.source, f.size, f.etag, report)
    return paths[0]


def _store(run: BenchmarkRun, result: SweepResult, build: llamacpp.Build, hw: dict, server_caps,
           target_path: str, draft_path: str) -> None:
    """Save every cell as a measured result, the recommendations and the deployment artifacts."""
    label = f"{hw.get('cpu_model', '')} ({hardware_class(hw)})"[:200]
    rows = []
    for c in result.cells:
        failed_runs = [r for r in c.runs if r.error]
        if failed_runs:
            log(run.pk, f"K={c.cell.k} {c.cell.content_type}: {failed_runs[0].error}")
        rows.append(BenchmarkResult(
            run=run, pair=run.pair, k=c.cell.k, content_type=c.cell.content_type, temperature=c.cell.temperature,
            p_min=c.cell.p_min, n_predict=c.cell.n_predict, repeats=c.cell.repeats, n_prompts=len(c.cell.prompts),
            status=c.status, error=c.error or "", speculation_ran=c.speculation_ran,
            acceptance=c.acceptance_rate, speedup=c.speedup,
            tokens_per_second=c.spec.median if c.spec else None, tps_min=c.spec.min if c.spec else None,
            tps_max=c.spec.max if c.spec else None,
            baseline_tokens_per_second=c.plain.median if c.plain else None,
            baseline_min=c.plain.min if c.plain else None, baseline_max=c.plain.max if c.plain else None,
            drafted=c.n_drafted, accepted=c.n_accept, mean_accepted=c.mean_accepted_per_verification,
            identical=c.identical, divergences=[asdict(d) for d in c.divergences], other_cpu_share=c.other_cpu_share,
            hardware=label, llama_cpp_build=build.label[:32],
        ))
    process_s = sum(c.process_s for c in result.cells)
    summary = {
        "status": result.status, "error": result.error, "notes": list(result.prompt_notes),
        "recommendations": [asdict(r) for r in result.recommendations],
        "elapsed_s": result.elapsed_s, "process_s": process_s,
        "overhead_pct": 100 * (result.elapsed_s - process_s) / result.elapsed_s if result.elapsed_s else None,
    }
    pair = run.pair
    gpu = bool(hw.get("gpus"))
    # The files as this worker has them: the paths that were measured.
    deployments = {r.content_type: deploy.deployment(server_caps, target_path, draft_path, r, gpu=gpu)
                   for r in result.recommendations}
    # One server serves every content type: deploy the setting of the type with the best speed-up.
    best = max(result.recommendations, key=lambda r: (r.use_draft, r.speedup or 0), default=None)
    dep = deployments[best.content_type] if best else deploy.deployment(
        server_caps, target_path, None, None, gpu=gpu)
    summary["deploy_for"] = best.content_type if best else None
    report = deploy.markdown_report(result, hardware=hw, build=build, deployments=deployments)
    with transaction.atomic():
        BenchmarkResult.objects.bulk_create(rows)
        BenchmarkRun.objects.filter(pk=run.pk).update(summary=summary, report_md=report,
                                                      server_command=dep.command, systemd_unit=dep.unit)
    refresh_best(pair)

