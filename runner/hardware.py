"""Describe the machine a benchmark ran on: CPU, cores, memory, GPUs, and a short hardware-class label."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from typing import Any

from inspector.llama_flags import ALL_GPU_LAYERS


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


def nvidia_smi(fields: str) -> list[list[str]]:
    """``nvidia-smi --query-gpu=FIELDS`` as rows of stripped values, one per GPU; [] when no NVIDIA GPU answers
    (only NVIDIA GPUs are detected)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [[p.strip() for p in line.split(",")] for line in out.stdout.strip().splitlines()]


def _nvidia_gpus() -> list[dict[str, Any]]:
    gpus = []
    for parts in nvidia_smi("name,memory.total,driver_version"):
        if len(parts) >= 3:
            mem = int(parts[1]) * 1024 * 1024 if parts[1].isdigit() else None
            gpus.append({"vendor": "nvidia", "name": parts[0], "memory_bytes": mem, "driver": parts[2]})
    return gpus


def detect(backend: str = "") -> dict[str, Any]:
    """The hardware as a JSON-ready dict (stored with every benchmark). ``backend`` is what the llama.cpp build in use
    offloads to (runner.llama.binaries.build_backend: cpu or cuda; "" unknown): a CPU-only build on a GPU machine
    measures the CPU, and its class says so."""
    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_cores": _usable_cores(),
        "cpu_cores_total": os.cpu_count(),
        "ram_bytes": ram_bytes(),
        "arch": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "gpus": _nvidia_gpus(),
    }
    if backend:
        info["llama_backend"] = backend
    info["hardware_class"] = hardware_class(info)
    return info


def _gpu_slug(name: str) -> str:
    # "NVIDIA H100 80GB HBM3" -> "h100"; "NVIDIA GeForce RTX 4090" -> "rtx-4090"
    name = re.sub(r"(?i)\b(nvidia|geforce|tesla|quadro)\b", " ", name)
    name = re.sub(r"(?i)\b\d+\s*gb\b.*$", " ", name)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug or "unknown"


def offloads(info: dict[str, Any]) -> bool:
    """Whether llama.cpp runs on this machine's GPU: one is detected (NVIDIA only, by nvidia-smi) and the build in
    use is not a CPU-only one (a build of unknown backend is taken at its word that it can)."""
    return bool(info.get("gpus")) and info.get("llama_backend") != "cpu"


def gpu_layers(info: dict[str, Any]) -> int | None:
    """The layers every llama.cpp process of a benchmark or a prediction offloads (``-ngl``, and ``-ngld`` for a
    second model): SPECREG_GPU_LAYERS when set ("0": none; a number; "all"), else all of them where the machine
    offloads (``offloads``), else None (llama.cpp's default)."""
    value = os.environ.get("SPECREG_GPU_LAYERS", "").strip().lower()
    if value == "all":
        return ALL_GPU_LAYERS
    if value.isdigit():
        return int(value)
    return ALL_GPU_LAYERS if offloads(info) else None


def hardware_class(info: dict[str, Any]) -> str:
    """Short label that groups comparable machines: ``cpu-2c``, ``gpu-nvidia-h100``, ``gpu-nvidia-a100x2``; a
    GPU machine whose llama.cpp build runs on the CPU only is a ``cpu-…`` one."""
    gpus = info.get("gpus") or []
    if gpus and offloads(info):
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
