"""The Celery application as workers start it (``celery -A runner.celery worker``): the registry's app
(registry.celery) plus the runner's worker start/stop handlers."""

from __future__ import annotations

from registry.celery import app
from runner import worker_signals  # noqa: F401  (connects the worker's start/stop handlers)

__all__ = ["app"]
