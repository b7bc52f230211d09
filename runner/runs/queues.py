"""The runner's Celery queues: one benchmark queue per hardware class (the general, telemetry and crawl queues
are the registry's: registry.queues)."""

from __future__ import annotations

import os

from django.conf import settings

from runner.hardware import detect, hardware_class
from runner.llama.binaries import build_backend


def bench_queue(hardware_class: str) -> str:
    """The queue benchmarks for a hardware class go to, e.g. ``bench.cpu-2c`` or ``bench.gpu-nvidia-h100``."""
    return f"{settings.SPECREG_QUEUE_PREFIX}bench.{hardware_class}"


def local_hardware_class() -> str:
    return os.environ.get("SPECREG_HARDWARE_CLASS") or hardware_class(detect(build_backend()))
