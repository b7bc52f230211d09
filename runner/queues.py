"""Celery queue names: one general queue, one for telemetry scrapes (registry.queues), and one benchmark queue per
hardware class."""

from __future__ import annotations

import os

from django.conf import settings

from registry.queues import telemetry_queue


def bench_queue(hardware_class: str) -> str:
    """The queue benchmarks for a hardware class go to, e.g. ``bench.cpu-2c`` or ``bench.gpu-nvidia-h100``."""
    return f"{settings.SPECREG_QUEUE_PREFIX}bench.{hardware_class}"


def local_hardware_class() -> str:
    from runner.hardware import detect, hardware_class

    return os.environ.get("SPECREG_HARDWARE_CLASS") or hardware_class(detect())


def worker_queues() -> list[str]:
    """Queues this machine's workers consume: the general queue, telemetry, and its hardware class's bench queue."""
    return [settings.CELERY_TASK_DEFAULT_QUEUE, telemetry_queue(), bench_queue(local_hardware_class())]
