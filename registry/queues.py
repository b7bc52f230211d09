"""Celery queue names the registry sends to (the runner adds one benchmark queue per hardware class)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.conf import settings
from django.utils.module_loading import import_string


def telemetry_queue() -> str:
    """The queue of deployment scrapes (``runner.tasks.scrape_deployment[s]``, in registry.team.tasks): a worker
    of its own, so a /metrics server answering slowly delays other scrapes at most, never a queued check or
    Hub job."""
    return f"{settings.SPECREG_QUEUE_PREFIX}telemetry"


def listening_workers() -> Callable[[str], Sequence[object]] | None:
    """The function that lists the live workers on a queue (SPECREG_WORKERS_ON, a dotted path: the runner's
    worker heartbeats by default), or None where none is configured and who listens is unknown.

    A setting rather than an import: the registry never imports the runner, which plugs in here."""
    path = getattr(settings, "SPECREG_WORKERS_ON", "")
    return import_string(path) if path else None
