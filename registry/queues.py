"""Celery queue names the registry sends to (the runner adds one benchmark queue per hardware class), and
sending a task to one. The settings' CELERY_TASK_ROUTES spell the same names (settings import no app code)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.conf import settings
from django.utils.module_loading import import_string

from registry.celery import app


def telemetry_queue() -> str:
    """The queue of deployment scrapes (``runner.tasks.scrape_deployment[s]``, in registry.team.tasks): a worker
    of its own, so a /metrics server answering slowly delays other scrapes at most, never a queued check or
    Hub job."""
    return f"{settings.SPECREG_QUEUE_PREFIX}telemetry"


def crawl_queue() -> str:
    """The queue of Hub crawls (``registry.tasks.crawl_list``/``crawl_repo``): a worker of its own, so a long
    crawl never holds up a user's import or a benchmark."""
    return f"{settings.SPECREG_QUEUE_PREFIX}crawl"


def listening_workers() -> Callable[[str], Sequence[object]] | None:
    """The function that lists the live workers on a queue (SPECREG_WORKERS_ON, a dotted path: the runner's
    worker heartbeats by default), or None where none is configured and who listens is unknown.

    A setting rather than an import: the registry never imports the runner, which plugs in here."""
    path = getattr(settings, "SPECREG_WORKERS_ON", "")
    return import_string(path) if path else None


def send(task_name: str, pk: int, queue: str) -> None:
    """Send the task registered as ``task_name`` with one record's id, to ``queue``.

    By name, through the configured app: a sender (a page, a crawl step, a submit) never imports the module
    that defines the task, whose code in turn reaches the sender's package (crawl -> registry.hub.tasks ->
    crawl was a cycle). A web process has not loaded the task modules until its first send; loading them
    then is what a worker does at start. ``apply_async`` on the registered task (not ``app.send_task``) so
    that CELERY_TASK_ALWAYS_EAGER still runs it in place."""
    if task_name not in app.tasks:
        app.loader.import_default_modules()
    # Celery takes a list for args (celery-types wants a tuple; tests compare it as a list)
    app.tasks[task_name].apply_async(args=[pk], queue=queue)  # type: ignore[arg-type]
