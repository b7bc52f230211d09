"""Describe the machine a benchmark ran on: CPU, cores, memory, GPUs, and a short hardware-class label."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.split(":", 1)[0].strip() in ("model name", "Hardware", "Model"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _usable_cores() -> int:
    # The affinity mask is what llama.cpp can really use inside a container or under taskset.
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def ram_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _nvidia_gpus() -> list[dict[str, Any]]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    gpus = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            mem = int(parts[1]) * 1024 * 1024 if parts[1].isdigit() else None
            gpus.append({"vendor": "nvidia", "name": parts[0], "memory_bytes": mem, "driver": parts[2]})
    return gpus


def detect() -> dict[str, Any]:
    """The hardware as a JSON-ready dict (stored with every benchmark)."""
    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_cores": _usable_cores(),
        "cpu_cores_total": os.cpu_count(),
        "ram_bytes": ram_bytes(),
        "arch": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "gpus": _nvidia_gpus(),
    }
    info["hardware_class"] = hardware_class(info)
    return info


def _gpu_slug(name: str) -> str:
    # "NVIDIA H100 80GB HBM3" -> "h100"; "NVIDIA GeForce RTX 4090" -> "rtx-4090"
    name = re.sub(r"(?i)\b(nvidia|geforce|tesla|quadro)\b", " ", name)
    name = re.sub(r"(?i)\b\d+\s*gb\b.*$", " ", name)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or "unknown"


def hardware_class(info: dict[str, Any]) -> str:
    """Short label that groups comparable machines: ``cpu-2c``, ``gpu-nvidia-h100``, ``gpu-nvidia-a100x2``."""
    gpus = info.get("gpus") or []
    if gpus:
        slug = _gpu_slug(gpus[0].get("name", ""))
        count = f"x{len(gpus)}" if len(gpus) > 1 else ""
        return f"gpu-{gpus[0].get('vendor', 'gpu')}-{slug}{count}"
    return f"cpu-{info.get('cpu_cores') or 1}c"


def measurement_class(info: dict[str, Any]) -> str:
    """The hardware class with the llama.cpp build's instruction set: ``cpu-2c/avx2``, ``cpu-8c/avx512+amx``.

    Figures are compared and recommended within one of these: the same machine runs an AVX-512 build
    and an AVX2 build at different speeds. The Celery queue keeps the plain class (``bench.cpu-2c``),
    since any build on such a machine can take the work."""
    cls = info.get("hardware_class") or hardware_class(info)
    isa = info.get("llama_isa")
    return f"{cls}/{isa}" if isa else cls


def figure_label(info: dict[str, Any]) -> str:
    """How a figure names the machine it was measured on: the CPU model and the measurement class (the
    ``hardware`` column of measured, predicted and stability results)."""
    return f"{info.get('cpu_model', '')} ({measurement_class(info)})"[:200]
