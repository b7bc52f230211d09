"""Benchmark runs as database records: queue, claim, cancel, log, and sweep runs whose worker died.

Views, Celery tasks and management commands all call these functions; the tasks only pass ids.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from registry.models import BenchmarkRun, Pair

from .models import workers_on
from .params import BenchmarkError, check_hardware_class, normalize_params
from .queues import bench_queue, local_hardware_class

STALE_AFTER_S = 120  # a running run without a heartbeat this long is declared dead
LOG_LIMIT = 200_000  # characters of log kept per run


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def queue_benchmark(pair: Pair, params: dict[str, Any], *, user=None, hardware: str | None = None,
                    send: bool = True, target_alone: bool = False) -> BenchmarkRun:
    """Record a queued run and (``send``) hand its task to the broker once the transaction commits.

    ``target_alone``: the run measures the target's draftless methods (n-gram, its own MTP heads); it is
    recorded on the target's own pair (the target paired with itself), whose table row then shows the
    method instead of a draft."""
    if target_alone:
        params = {**params, "target_alone": True}
    if not pair.compatible:
        raise BenchmarkError(f"{pair.draft.source} cannot draft for {pair.target.source}: rule "
                             f"'{pair.failed_rule}' fails ({_rule_detail(pair)})")
    params = normalize_params(params)
    hw = check_hardware_class(hardware or local_hardware_class())
    with transaction.atomic():
        if getattr(user, "is_authenticated", False):
            # Count and create under the user's row lock (PostgreSQL; SQLite's IMMEDIATE transactions
            # serialize writers anyway), so requests sent at once cannot all pass the count.
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            active = BenchmarkRun.objects.filter(requested_by=user,
                                                 status__in=(BenchmarkRun.QUEUED, BenchmarkRun.RUNNING))
            limit = settings.SPECREG_MAX_ACTIVE_RUNS_PER_USER
            if active.count() >= limit:
                raise BenchmarkError(f"you already have {limit} benchmark(s) queued or running, the most allowed "
                                     "(SPECREG_MAX_ACTIVE_RUNS_PER_USER); cancel one or wait for it to finish")
        run = BenchmarkRun.objects.create(pair=pair, params=params, queue=bench_queue(hw), hardware_class=hw,
                                          requested_by=user if getattr(user, "is_authenticated", False) else None)
        if send:
            transaction.on_commit(lambda: _send(run))
    return run


def _rule_detail(pair: Pair) -> str:
    for c in pair.result.get("checks", []):
        if c["rule"] == pair.failed_rule:
            return c["detail"].rstrip(".")
    return "see the pair page"


def _send(run: BenchmarkRun) -> None:
    # Imported here: only queueing pays for loading Celery, not every command and page.
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


def sweep_stale(stale_after_s: int = STALE_AFTER_S, queued_for_s: float | None = None) -> int:
    """Fail running runs whose worker stopped sending heartbeats (killed, machine lost), and runs
    queued longer than ``queued_for_s`` (SPECREG_QUEUED_TIMEOUT_HOURS) with no worker on their queue."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=stale_after_s)
    n = BenchmarkRun.objects.filter(status=BenchmarkRun.RUNNING, heartbeat_at__lt=cutoff).update(
        status=BenchmarkRun.FAILED, finished_at=now,
        error=f"the worker stopped responding (no heartbeat for {stale_after_s} s); run it again")
    queued_for_s = settings.SPECREG_QUEUED_TIMEOUT_HOURS * 3600 if queued_for_s is None else queued_for_s
    old = BenchmarkRun.objects.filter(status=BenchmarkRun.QUEUED, created_at__lt=now - timedelta(seconds=queued_for_s))
    for queue in set(old.values_list("queue", flat=True)):
        if not workers_on(queue):
            n += old.filter(queue=queue).update(
                status=BenchmarkRun.FAILED, finished_at=now,
                error=f"no worker listened on queue {queue} for {queued_for_s / 3600:g} h; start one for this "
                      "hardware class and queue the run again")
    return n


def claim(run_id: int) -> bool:
    """Take a queued run for this process; False when another worker has it or it was cancelled."""
    now = timezone.now()
    return BenchmarkRun.objects.filter(pk=run_id, status=BenchmarkRun.QUEUED).update(
        status=BenchmarkRun.RUNNING, started_at=now, heartbeat_at=now, worker=worker_name()) == 1


def log(run_id: int, line: str) -> None:
    stamp = timezone.now().strftime("%H:%M:%S")
    run = BenchmarkRun.objects.get(pk=run_id)
    text = (run.log + f"[{stamp}] {line}\n")[-LOG_LIMIT:]
    BenchmarkRun.objects.filter(pk=run_id).update(log=text)
