"""Every script the documentation names runs as documented: from the repository root with the project's Python,
``--help`` prints its usage and exits before any work (no model, no llama.cpp, no database)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]

# `python tests/bench/bench_gpu.py …`, `.venv/bin/python manage.py …`, `python3 …`, and any benchmark script named
# by its path alone (`tests/bench/bench_orchestration.py`: the docs say to run those with the project's Python).
RUN = re.compile(r"(?:\.venv/bin/)?\bpython3?\s+(?!-)([\w./-]+\.py)\b")
BENCH = re.compile(r"(?<![\w/.-])(tests/bench/[\w-]+\.py)\b")


def documented_scripts() -> list[str]:
    """The scripts the documentation names, as paths from the repository root; placeholders (NAME.py) left out."""
    found: set[str] = set()
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        found.update(m.group(1) for m in RUN.finditer(text))
        found.update(m.group(1) for m in BENCH.finditer(text))
    return sorted(p for p in found if (ROOT / p).is_file())


SCRIPTS = documented_scripts()


def test_the_docs_name_the_scripts():
    assert "tests/bench/bench_orchestration.py" in SCRIPTS and "manage.py" in SCRIPTS, SCRIPTS
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_documented_script_answers_help(script, tmp_path):
    # as a user runs it: no settings module or database chosen by the test run, a data folder of its own
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env["SPECREG_DATA_DIR"] = str(tmp_path / "data")
    r = subprocess.run(
        [sys.executable, script, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    # argparse's "usage:"; Django's manage.py lists its subcommands instead
    assert "usage" in out.lower() or (script == "manage.py" and "Available subcommands" in out), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
