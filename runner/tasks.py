"""Celery tasks: thin wrappers that pass ids to the runner's plain functions."""
from __future__ import annotations

from .celery import app
from .execute import execute
from .runs import sweep_stale


@app.task(name="runner.tasks.run_benchmark", acks_late=True, ignore_result=True)
def run_benchmark(run_id: int) -> str:
    # A re-delivered message finds the run already claimed and returns at once.
    return execute(run_id)


@app.task(name="runner.tasks.sweep_stale_runs", ignore_result=True)
def sweep_stale_runs() -> int:
    return sweep_stale()


@app.task(name="runner.tasks.hub_job", acks_late=True, ignore_result=True)
def hub_job(job_id: int) -> str:
    from registry.hub_jobs import execute_job

    return execute_job(job_id)


# Both scrape tasks go to the telemetry queue (CELERY_TASK_ROUTES; queue_scrape names it too), whose worker
# does nothing else: a slow /metrics never holds a queued check or Hub job.
@app.task(name="runner.tasks.scrape_deployments", ignore_result=True)
def scrape_deployments() -> int:
    # Each failed scrape is stored as a gap with its error; nothing here raises for one bad server.
    from registry.team.telemetry import scrape_active

    return len(scrape_active())


@app.task(name="runner.tasks.scrape_deployment", ignore_result=True)
def scrape_deployment(deployment_id: int) -> str:
    # "Scrape now" on a deployment's page: queued there, so the web request never waits for a server.
    from registry.team.telemetry import run_queued_scrape

    return run_queued_scrape(deployment_id)
