"""The Celery application; configuration comes from Django settings (CELERY_* names)."""
from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")

app = Celery("specreg")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

from . import worker_signals  # noqa: E402,F401  (connects the worker's start/stop handlers)
