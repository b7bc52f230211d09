"""Queueing one scrape of a deployment ("scrape now") for the telemetry worker (registry.team.tasks)."""

from __future__ import annotations

from django.utils import timezone

from registry.queues import send, telemetry_queue
from registry.team.models import Deployment
from registry.team.telemetry import SCRAPE_PENDING_FOR


def queue_scrape(deployment: Deployment) -> bool:
    """Queue one scrape of ``deployment`` for the telemetry worker, unless one is already waiting or running
    (a repeated click must not pile scrapes up); False then. The web request never fetches anything."""
    now = timezone.now()
    pending = Deployment.objects.filter(pk=deployment.pk, scrape_queued_at__gte=now - SCRAPE_PENDING_FOR)
    if pending.exists():
        return False
    Deployment.objects.filter(pk=deployment.pk).update(scrape_queued_at=now, scrape_started_at=None)
    try:
        send("runner.tasks.scrape_deployment", deployment.pk, telemetry_queue())
    except Exception:
        Deployment.objects.filter(pk=deployment.pk).update(scrape_queued_at=None)
        raise
    deployment.scrape_queued_at, deployment.scrape_started_at = now, None
    return True
