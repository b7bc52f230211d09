"""Celery tasks: thin wrappers that pass ids to runner.service."""
from __future__ import annotations

from celery import shared_task

from . import service


@shared_task(acks_late=True, ignore_result=True)
def run_benchmark(run_id: int) -> str:
    # A re-delivered message finds the run already claimed and returns at once.
    return service.execute(run_id)


@shared_task(ignore_result=True)
def sweep_stale_runs() -> int:
    return service.sweep_stale()
