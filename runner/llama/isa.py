"""Which instruction set this machine really runs: its CPU flags, and whether AMX tile instructions work
(a child process executes one). See runner.llama.build for why this is probed instead of trusting CPUID.

Written by hand: no library probes AMX.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from runner.hardware import nvidia_smi
from runner.llama.procs import describe_exit


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


def cuda_architectures() -> str:
    """The compute capability of this machine's NVIDIA GPUs as CMake names it (``90`` for 9.0), ``;``-joined when
    they differ; empty when no NVIDIA GPU answers (only NVIDIA GPUs are detected)."""
    caps = {row[0].replace(".", "") for row in nvidia_smi("compute_cap") if row}
    return ";".join(sorted(c for c in caps if c.isdigit()))
