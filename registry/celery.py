"""The Celery application (part of the composition root, with settings, urls and wsgi); configuration
comes from Django settings (CELERY_* names). Every task is a ``shared_task`` in the package whose work it
does (registry.tasks, registry.team.tasks, runner.tasks), found by ``autodiscover_tasks``.

The registry app loads this module when Django starts (RegistryConfig.ready), so a web process sends
tasks through this configured app and never through Celery's unconfigured default. Workers start from
``runner.celery``, which adds the runner's worker signals.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")

app = Celery("specreg")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
