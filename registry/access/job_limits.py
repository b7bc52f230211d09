"""Limits on queued Hub work: per user, like benchmark runs, and for the whole installation.

Checked when a job is queued, under the requesting user's row lock (as ``runner.runs.records`` counts runs),
so requests sent at once cannot all pass the count. Anonymous check jobs are already limited per
client address (``rate_limits``); the global cap bounds what every client together can queue.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model

from registry.models import HubJob

ACTIVE = (HubJob.QUEUED, HubJob.RUNNING)


class JobLimit(Exception):
    """Too much Hub work is queued; one line, and the HTTP status that says whose limit it is."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status  # 429: this user's limit; 503: the installation's queue is full


def check_job_limits(user) -> None:
    """Raise JobLimit when ``user`` (or everyone) already has the most jobs allowed. Call inside a transaction."""
    if getattr(user, "is_authenticated", False):
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        limit = settings.SPECREG_MAX_ACTIVE_JOBS_PER_USER
        if HubJob.objects.filter(requested_by=user, status__in=ACTIVE).count() >= limit:
            raise JobLimit(
                f"you already have {limit} Hub job(s) queued or running, the most allowed "
                "(SPECREG_MAX_ACTIVE_JOBS_PER_USER); wait for one to finish",
                429,
            )
    cap = settings.SPECREG_MAX_QUEUED_JOBS
    if HubJob.objects.filter(status=HubJob.QUEUED).count() >= cap:
        raise JobLimit(
            f"the server already has {cap} Hub jobs waiting (SPECREG_MAX_QUEUED_JOBS); try again in a few minutes", 503
        )
