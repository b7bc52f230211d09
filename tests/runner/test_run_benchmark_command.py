"""run_benchmark from the shell: --wait with no worker says so at once; --here runs without one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.installations import migrated_env

ROOT = Path(__file__).resolve().parents[2]


def _run_benchmark(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "run_benchmark", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_wait_with_no_worker_on_the_queue_says_so_and_exits_2(tmp_path, smollm2_path):
    env = {**migrated_env(tmp_path, "cpu-nobody-listens"), "SPECREG_NO_WORKER_AFTER_SECONDS": "2"}
    start = time.monotonic()
    r = _run_benchmark(env, str(smollm2_path), str(smollm2_path), "--k", "4", "--wait", timeout=60)
    took = time.monotonic() - start
    assert r.returncode == 2, r.stderr
    assert took < 30  # its 2 s wait, not until the 60 s time-out: the command gives up by itself
    last = r.stderr.strip().splitlines()[-1]
    assert "no worker is listening on queue bench.cpu-nobody-listens" in last
    assert "celery -A runner worker -Q bench.cpu-nobody-listens" in last and "--here" in last
    assert "Traceback" not in r.stderr


@pytest.mark.llama
def test_here_runs_the_benchmark_in_this_process_and_prints_the_results(tmp_path, smollm2_path):
    env = migrated_env(tmp_path, "cpu-nobody-listens")
    r = _run_benchmark(
        env,
        str(smollm2_path),
        str(smollm2_path),
        "--methods",
        "draft-simple",
        "--k",
        "4",
        "--no-extend",
        "--p-min",
        "0",
        "--tasks",
        "json",
        "--n-predict",
        "32",
        "--repeats",
        "1",
        "--prompts-per-type",
        "1",
        "--here",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "running run 1 here" in out and "run 1: done" in out
    assert "plain t/s" in out and "recommended for json at temperature 0.0" in out
    row = next(line for line in out.splitlines() if line.startswith("json "))
    # the setting (method, K, p-min), and the build read from the package metadata
    assert row.split()[2:5] == ["draft-simple", "K=4", "p-min=0"] and "b11434" in out
