"""The runner's own operational state: which workers are alive and which queues they consume.

Benchmark runs and their results are the registry's data (``registry.models``); this table only
lets ``run_benchmark --wait`` and the pages tell "queued, a worker will take it" from "queued, and
no worker listens on that queue".
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone

ALIVE_S = 30  # a worker writes its row every 10 s; one silent this long is gone


class WorkerPresence(models.Model):
    name = models.CharField(max_length=200, unique=True)  # Celery's node name, e.g. celery@host
    queues = models.JSONField(default=list)
    hardware_class = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} ({', '.join(self.queues)})"


def workers_on(queue: str) -> list[WorkerPresence]:
    """Live workers consuming ``queue``."""
    alive = WorkerPresence.objects.filter(seen_at__gte=timezone.now() - timedelta(seconds=ALIVE_S))
    return [w for w in alive if queue in w.queues]
