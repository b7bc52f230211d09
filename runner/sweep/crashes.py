"""Why a llama.cpp process died: this build's instruction set, or this model and setting.

A SIGILL means the build uses instructions this machine does not allow (a VM that reports AMX or
AVX-512 it does not enable): every later setting would die the same way, so the run stops with one
explanation and the command that rebuilds. Any other crash (SIGSEGV, SIGABRT, …) is first taken as a
crash of that model and setting; the instruction set is blamed only when the smoke check (a tiny
Q4_0 generation, ``runner.llama.smoke``) crashes too — on the affected VMs two threads turn
the illegal instruction into a SIGSEGV.
"""

from __future__ import annotations

import signal
from pathlib import Path

from runner.llama import binaries, smoke
from runner.measure.cli import CellResult

# Stopped from outside (the OOM killer, a worker stopping, a time-out): nothing about the build.
_OUTSIDE = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _tool(result: CellResult) -> str:
    if result.cell.via == "server":
        return binaries.SERVER
    run = next((r for r in result.runs if r.signal), None)
    return binaries.COMPLETION if run is not None and run.kind == "plain" else binaries.SPECULATIVE


def _bin_dir() -> Path | None:
    try:
        return binaries.find_binary(binaries.COMPLETION).parent
    except binaries.LlamaCppNotFound:
        return None


class CrashDiagnosis:
    """Per run: the smoke check runs at most once, whatever number of settings crash."""

    def __init__(self) -> None:
        self._smoke: smoke.Smoke | None = None

    def build_at_fault(self, result: CellResult) -> str | None:
        """The run-stopping explanation when this cell's crash is the build's fault, else None."""
        sig = result.crash_signal
        if not sig or sig in _OUTSIDE:
            return None
        if sig == signal.SIGILL:
            bin_dir = _bin_dir()
            isa = binaries.build_isa(bin_dir) if bin_dir else ""
            return smoke.sigill_explanation(_tool(result), isa)
        if self._smoke is None:
            self._smoke = smoke.smoke()
        return None if self._smoke.ok else self._smoke.message
