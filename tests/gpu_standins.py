"""A stand-in ``nvidia-smi`` on PATH, for GPU plans and offloads tested on a machine without a GPU."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

# Answers as a machine with one H100 does.
H100_SMI = """#!/bin/sh
case "$*" in
  *compute_cap*) echo "9.0" ;;
  *name,memory.total,driver_version*) echo "NVIDIA H100 80GB HBM3, 81559, 550.54.15" ;;
  *) exit 9 ;;
esac
"""


def smi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """A stand-in ``nvidia-smi`` running ``script``, first on PATH."""
    folder = tmp_path / "smi"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(script)
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return smi
