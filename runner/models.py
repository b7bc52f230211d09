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


class KeptResult(models.Model):
    """What runner.predict.kept keeps of the replay tool's work: keyed (``key``) by the model file's sha256, the build,
    the tool, the options and where it holds; the model file named for people; the tool's JSON (``data``)."""

    key = models.CharField(max_length=64, unique=True)
    model_sha256 = models.CharField(max_length=64, db_index=True)
    model_name = models.CharField(max_length=255)  # the file's name when it was made, for people
    model_size = models.BigIntegerField()
    build = models.CharField(max_length=64)
    hardware_class = models.CharField(max_length=64, db_index=True)  # the measurement class: cpu-2c/avx512
    data = models.JSONField()
    seconds = models.FloatField(null=True)  # how long making it took: what reusing it saves
    created_at = models.DateTimeField(auto_now_add=True)

    objects = models.Manager()  # declared here so that runner.predict.kept can treat both kinds alike

    class Meta:
        abstract = True


class KeptTranscript(KeptResult):
    """The target's output for one prompt (greedy at temperature 0, else sampled with its distributions), made by
    the replay tool and kept so that the target runs once per prompt, options, build and hardware class: every
    draft, method and later prediction on any worker of that class reuses it (runner.predict.kept). ``data`` holds the
    prompt and generated tokens, margins (and distributions above temperature 0).

    Keyed by the model file's sha256, not its path: a file downloaded again, renamed or held by another worker
    is the same model. The hardware class is part of the key because kernels built for another instruction set
    can break a near-tie the other way."""

    task = models.CharField(max_length=200, blank=True)  # "default/code/c1": which task of which set, for people
    n_predict = models.IntegerField()
    temperature = models.FloatField(default=0.0)

    def __str__(self) -> str:
        return f"{self.model_name} {self.task or self.key[:12]} ({self.hardware_class})"


class CostMeasurement(KeptResult):
    """A model file's cost model on one machine (runner.predict.prediction.measure_cost): the time to decode a batch of
    1, 2, … tokens with every token's logits at a context depth, and to sample one position (``data``: the
    tool's timing JSON). Kept per machine, not per hardware class: two machines of one class can decode the same
    model at very different speeds, so one machine's cost model never predicts for another; the hardware page shows
    every machine's."""

    host = models.CharField(max_length=255)
    threads = models.IntegerField(null=True)
    depth = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.model_name} on {self.host} ({self.hardware_class})"
