"""Queueing Hub jobs (imports, draft searches, anonymous checks) for a worker: long Hub work never runs in a
web request.

The task (``runner.tasks.hub_job``, defined in registry.tasks) is sent through the configured Celery app
(registry.celery); the registry queues its own work and never imports the runner.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from inspector.hf_spec import parse_hf_spec
from inspector.hub_names import shard_names
from inspector.sources import SourceError
from registry.access.job_limits import check_job_limits
from registry.access.policy import may_use_server_token
from registry.hub.checking import CheckError, info_for, visitor_source
from registry.models import GGUFFile, HubJob
from registry.queues import send


def queue_job(kind: str, params: dict[str, Any], *, user=None) -> HubJob:
    """Record a queued job and hand its task to the broker once the transaction commits.

    Raises ``registry.access.job_limits.JobLimit`` past the user's or the installation's limit."""
    with transaction.atomic():
        check_job_limits(user)
        # Decided when the person asks, kept with the job: the worker has no request to look at.
        params = {**params, "server_token": may_use_server_token(user)}
        job = HubJob.objects.create(
            kind=kind,
            params=params,
            queue=settings.CELERY_TASK_DEFAULT_QUEUE,
            requested_by=user if getattr(user, "is_authenticated", False) else None,
        )
        transaction.on_commit(lambda: _send(job))
    return job


def _send(job: HubJob) -> None:
    # Adapting a draft downloads it whole: the runner's task (runner.tasks.adapt_job) runs that job.
    task = "runner.tasks.adapt_job" if job.kind in HubJob.RUNNER_KINDS else "runner.tasks.hub_job"
    send(task, job.pk, job.queue)


def queue_if_remote(target: str, draft: str, user=None) -> HubJob | None:
    """An anonymous visitor's check that must read the Hub, queued as a job; None to check at once.

    Remote header reads take up to SPECREG_HEADER_DEADLINE_SECONDS each, so a few anonymous ones would
    hold every web worker: they run in a Celery worker instead. Signed-in users, and checks of
    registered files only (no remote read), are answered in the request. Names that can never be read
    are refused here (CheckError), without the network, as the check itself would refuse them.
    """
    if user is not None and user.is_authenticated:
        return None
    # the job keeps the names as given: its check resolves them again, as this visitor (no draft: the target alone)
    names = [visitor_source(target, user)] + ([visitor_source(draft, user)] if draft.strip() else [])
    registered = set(GGUFFile.objects.filter(source__in=names).values_list("source", flat=True))
    remote = [s for s in names if s.startswith("hf://") and s not in registered]
    if not remote:
        return None

    for source in names:
        try:
            if source in remote:
                parse_hf_spec(source)
                shard_names(source)
            elif source not in registered:
                info_for(source)  # empty, a path or a URL: refused at once, with the check's own message
        except SourceError as exc:
            raise CheckError(str(exc)) from None
    # user=None: the worker reads as an anonymous visitor (no server token, the public header cap).
    return queue_job(HubJob.CHECK_PAIR, {"target": target.strip(), "draft": draft.strip()}, user=None)
