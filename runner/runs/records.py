"""Benchmark runs as database records: claim, cancel, log, and sweep runs whose worker died (queueing one:
runner.runs.submit).

Views, Celery tasks and management commands all call these functions; the tasks only pass ids.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from registry.models import BenchmarkRun, StabilityResult
from runner.errors import BenchmarkError
from runner.models import workers_on

STALE_AFTER_S = 120  # a running run without a heartbeat this long is declared dead
LOG_LIMIT = 200_000  # characters of log kept per run


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def cancel(run_id: int) -> str:
    """Cancel a queued run at once, or ask the worker of a running one to stop; returns the new state."""
    if BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.QUEUED).update(
        status=BenchmarkRun.CANCELLED, finished_at=timezone.now(), error="cancelled before it started"
    ):
        return BenchmarkRun.CANCELLED
    if BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.RUNNING).update(cancel_requested=True):
        return "cancelling"
    run = BenchmarkRun.objects.filter(pk=run_id).first()
    if run is None:
        raise BenchmarkError(f"no benchmark run {run_id}")
    return run.status


def sweep_stale(stale_after_s: int = STALE_AFTER_S, queued_for_s: float | None = None) -> int:
    """Fail running runs whose worker stopped sending heartbeats (killed, machine lost), and runs
    queued longer than ``queued_for_s`` (SPECREG_QUEUED_TIMEOUT_HOURS) with no worker on their queue."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=stale_after_s)
    n = BenchmarkRun.objects.filter(status=BenchmarkRun.RUNNING, heartbeat_at__lt=cutoff).update(
        status=BenchmarkRun.FAILED,
        finished_at=now,
        error=f"the worker stopped responding (no heartbeat for {stale_after_s} s); run it again",
    )
    queued_for_s = settings.SPECREG_QUEUED_TIMEOUT_HOURS * 3600 if queued_for_s is None else queued_for_s
    old = BenchmarkRun.objects.filter(status=BenchmarkRun.QUEUED, created_at__lt=now - timedelta(seconds=queued_for_s))
    for queue in set(old.values_list("queue", flat=True)):
        if not workers_on(queue):
            n += old.filter(queue=queue).update(
                status=BenchmarkRun.FAILED,
                finished_at=now,
                error=f"no worker listened on queue {queue} for {queued_for_s / 3600:g} h; start one for this "
                "hardware class and queue the run again",
            )
    # A soak whose worker died keeps what it recorded, marked as cut short.
    StabilityResult.objects.filter(status=StabilityResult.RUNNING, run__status__in=BenchmarkRun.FINISHED).update(
        status=StabilityResult.INTERRUPTED,
        verdict="interrupted: its worker stopped before the soak ended; the partial record is kept",
        finished_at=now,
    )
    return n


def claim(run_id: int) -> bool:
    """Take a queued run for this process; False when another worker has it or it was cancelled."""
    now = timezone.now()
    return (
        BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.QUEUED).update(
            status=BenchmarkRun.RUNNING, started_at=now, heartbeat_at=now, worker=worker_name()
        )
        == 1
    )


def log(run_id: int, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    run = BenchmarkRun.objects.get(pk=run_id)
    text = (run.log + f"[{stamp}] {line}\n")[-LOG_LIMIT:]
    BenchmarkRun.objects.filter(pk=run_id).update(log=text)
