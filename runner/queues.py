"""Celery queue names: one general queue, one for telemetry scrapes, and one benchmark queue per hardware class."""
from __future__ import annotations

import os

from django.conf import settings


def bench_queue(hardware_class: str) -> str:
    """The queue benchmarks for a hardware class go to, e.g. ``bench.cpu-2c`` or ``bench.gpu-nvidia-h100``."""
    return f"{settings.SPECREG_QUEUE_PREFIX}bench.{hardware_class}"


def telemetry_queue() -> str:
    """The queue of deployment scrapes (``runner.tasks.scrape_deployment[s]``): a worker of its own, so a
    /metrics server answering slowly delays other scrapes at most, never a queued check or Hub job."""
    return f"{settings.SPECREG_QUEUE_PREFIX}telemetry"


def local_hardware_class() -> str:
    from runner.hardware import detect, hardware_class

    return os.environ.get("SPECREG_HARDWARE_CLASS") or hardware_class(detect())


def worker_queues() -> list[str]:
    """Queues this machine's workers consume: the general queue, telemetry, and its hardware class's bench queue."""
    return [settings.CELERY_TASK_DEFAULT_QUEUE, telemetry_queue(), bench_queue(local_hardware_class())]
