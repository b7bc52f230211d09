"""The benchmark scripts the README names run from a clone: each in its quick mode, with a tiny real measurement."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.llama
@pytest.mark.parametrize("via", ["cli", "server"])
def test_bench_methods_quick_runs_every_import_and_measures(tmp_path, smollm2_path, via):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env["SPECREG_DATA_DIR"] = str(tmp_path / "data")
    r = subprocess.run(
        [sys.executable, "tests/bench/bench_methods.py", "--quick", "--via", via],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    rows = [line for line in r.stdout.splitlines() if line.startswith("| code |")]
    assert len(rows) == 2 and "draft-simple K=2" in rows[0], r.stdout
    assert "t/s" not in rows[0].split("|")[3] and float(rows[0].split("|")[3].split()[0]) > 0  # a real plain speed
    assert f"measured via {via}" in r.stdout and "built for" in r.stdout


@pytest.mark.llama
def test_bench_predict_quick_sets_predictions_beside_measurements(tmp_path, smollm2_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env["SPECREG_DATA_DIR"] = str(tmp_path / "data")
    r = subprocess.run(
        [sys.executable, "tests/bench/bench_predict.py", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    rows = [line.split("|") for line in r.stdout.splitlines() if line.startswith("| code |")]
    assert [c[2].strip() for c in rows] == ["draft-simple K=2 p-min=0", "ngram-mod K=16"], r.stdout
    draft = rows[0]
    assert float(draft[3].strip().rstrip("%")) > 50 and float(draft[6].strip().rstrip("x")) > 0  # measured for real
    assert "once the transcript exists" in r.stdout and "## All" in r.stdout
