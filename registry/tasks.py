"""The registry's Celery task: a thin wrapper that passes a HubJob id to registry.hub.jobs.

Its name stays ``runner.tasks.hub_job`` (where it used to live), so messages already queued find it.
"""

from __future__ import annotations

from celery import shared_task

from registry.hub.jobs import execute_job


@shared_task(name="runner.tasks.hub_job", acks_late=True, ignore_result=True)
def hub_job(job_id: int) -> str:
    return execute_job(job_id)
