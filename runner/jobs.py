"""Queueing Hub jobs (imports, draft searches) for a worker: long Hub work never runs in a web request."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from registry.access import may_use_server_token
from registry.job_limits import check_job_limits
from registry.models import HubJob


def queue_job(kind: str, params: dict[str, Any], *, user=None) -> HubJob:
    """Record a queued job and hand its task to the broker once the transaction commits.

    Raises ``registry.job_limits.JobLimit`` past the user's or the installation's limit."""
    with transaction.atomic():
        check_job_limits(user)
        # Decided when the person asks, kept with the job: the worker has no request to look at.
        params = {**params, "server_token": may_use_server_token(user)}
        job = HubJob.objects.create(kind=kind, params=params, queue=settings.CELERY_TASK_DEFAULT_QUEUE,
                                    requested_by=user if getattr(user, "is_authenticated", False) else None)
        transaction.on_commit(lambda: _send(job))
    return job


def _send(job: HubJob) -> None:
    from .tasks import hub_job  # only queueing pays for loading Celery

    hub_job.apply_async(args=[job.pk], queue=job.queue)
