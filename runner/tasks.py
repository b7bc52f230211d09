"""The runner's Celery tasks: thin wrappers that pass ids to the runner's plain functions.

(The registry's tasks live in registry.tasks and registry.team.tasks.)
"""

from __future__ import annotations

from celery import shared_task

from registry.hub.jobs import execute_job
from runner.runs.downloads import fetch_whole
from runner.runs.execute import execute
from runner.runs.records import sweep_stale


@shared_task(name="runner.tasks.run_benchmark", acks_late=True, ignore_result=True)
def run_benchmark(run_id: int) -> str:
    # A re-delivered message finds the run already claimed and returns at once.
    return execute(run_id)


@shared_task(name="runner.tasks.sweep_stale_runs", ignore_result=True)
def sweep_stale_runs() -> int:
    return sweep_stale()


@shared_task(name="runner.tasks.adapt_job", acks_late=True, ignore_result=True)
def adapt_job(job_id: int) -> str:
    # A Hub job that downloads a whole draft (registry.hub.adapting): the registry's job, the runner's download.
    return execute_job(job_id, fetch_whole)
