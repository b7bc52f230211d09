"""The team app's Celery tasks: deployment scrapes, thin wrappers over registry.team.telemetry.

Both go to the telemetry queue (CELERY_TASK_ROUTES; queue_scrape names it too), whose worker does nothing
else: a slow /metrics never holds a queued check or Hub job. Their registered names are ``runner.tasks.…``,
whatever module defines them: a task's name is part of the messages on the broker and of the beat schedule, so it
never changes with the code's layout and messages already queued find it.
"""

from __future__ import annotations

from celery import shared_task

from registry.team.telemetry import run_queued_scrape, scrape_active


@shared_task(name="runner.tasks.scrape_deployments", ignore_result=True)
def scrape_deployments() -> int:
    # Each failed scrape is stored as a gap with its error; nothing here raises for one bad server.
    return len(scrape_active())


@shared_task(name="runner.tasks.scrape_deployment", ignore_result=True)
def scrape_deployment(deployment_id: int) -> str:
    # "Scrape now" on a deployment's page: queued there, so the web request never waits for a server.
    return run_queued_scrape(deployment_id)
