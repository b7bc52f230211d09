"""`manage.py serve` stops like a service: SIGTERM ends the running benchmark, gunicorn and the worker within 10 s.

Runs the real thing on a data folder of its own (SQLite, filesystem broker): serve starts gunicorn
and a Celery worker, a real llama.cpp benchmark runs, then serve gets SIGTERM as from systemd.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.installations import installation
from tests.local_servers import free_port, wait_for

pytestmark = pytest.mark.llama
ROOT = Path(__file__).resolve().parents[2]


def _marked(data: Path) -> list[int]:
    """Live processes started for this test's installation (they carry its SPECREG_DATA_DIR)."""
    mark = f"SPECREG_DATA_DIR={data}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if mark in env and state != "Z":
            found.append(int(entry))
    return found


def _cmdlines(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out


def test_sigterm_cancels_the_running_benchmark_and_leaves_no_process(tmp_path, smollm2_path):
    data, env, manage = installation(tmp_path)
    # Long enough to still be running when the stop comes: a plain run of 2,048 tokens, 5 repeats.
    queued = subprocess.run(
        [
            *manage,
            "run_benchmark",
            str(smollm2_path),
            str(smollm2_path),
            "--k",
            "4",
            "--no-extend",
            "--tasks",
            "prose",
            "--n-predict",
            "2048",
            "--repeats",
            "5",
            "--prompts-per-type",
            "1",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert queued.returncode == 0, queued.stderr
    port = free_port()
    serve = subprocess.Popen(
        [*manage, "serve", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def run_state() -> dict | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs/1", timeout=5) as r:
                    return json.load(r)
            except OSError:
                return None

        wait_for(lambda: (s := run_state()) and s["status"] == "running", 120, "the benchmark to start")
        # llama.cpp's programs, or the replay tool of the prediction every benchmark starts with
        busy = ("llama-", "specreg-replay")
        wait_for(lambda: any(b in c for c in _cmdlines(_marked(data)) for b in busy), 60, "a llama.cpp process")
        before = _cmdlines(_marked(data))
        assert any("gunicorn" in c for c in before), before
        # a benchmark worker and a general one (Hub jobs, checks, scrapes and the beat never wait for a benchmark)
        assert any("celery" in c and "bench@" in c for c in before), before
        assert any("celery" in c and "general@" in c and "--beat" in c for c in before), before
        serve.send_signal(signal.SIGTERM)
        start = time.monotonic()
        serve.wait(timeout=10)
        stopped_in = time.monotonic() - start
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        stray = _marked(data)  # a test that failed before its SIGTERM must not leave workers benchmarking
        if stray and "stopped_in" not in locals():
            for pid in stray:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    assert stopped_in < 10
    left = _cmdlines(_marked(data))
    assert left == [], f"left running after SIGTERM: {left}"
    with sqlite3.connect(data / "specreg.sqlite3") as db:
        status, error = db.execute("SELECT status, error FROM runner_benchmarkrun WHERE id = 1").fetchone()
    assert status == "cancelled" and "worker was stopped" in error


def test_sigterm_interrupts_a_soak_and_keeps_its_partial_record(tmp_path, smollm2_path):
    data, env, manage = installation(tmp_path)
    m = str(smollm2_path)

    def cmd(*args: str) -> subprocess.CompletedProcess:
        r = subprocess.run([*manage, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r

    cmd("run_benchmark", m, m, "--k", "4")  # queued: it records the pair (id 1) ...
    cmd("run_benchmark", "--cancel", "1")  # ... and is cancelled before any worker takes it
    queued = cmd("soak", "1", "--method", "draft-simple", "--k", "4", "--duration", "10m", "--interval", "5s")
    assert "queued soak run 2" in queued.stdout and "occupies that worker" in queued.stdout
    port = free_port()
    serve = subprocess.Popen(
        [*manage, "serve", "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    seen: list[dict] = []  # the intervals the API showed before the stop
    try:

        def recorded() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs/2", timeout=5) as r:
                    state = json.load(r)
            except OSError:
                return False
            if state["status"] == "running" and state["stability"] and state["stability"][0]["intervals"]:
                seen[:] = state["stability"][0]["intervals"]
                return True
            return False

        wait_for(recorded, 180, "the soak's first interval")
        serve.send_signal(signal.SIGTERM)
        start = time.monotonic()
        serve.wait(timeout=15)
        stopped_in = time.monotonic() - start
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        for pid in _marked(data) if "stopped_in" not in locals() else []:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert stopped_in < 15
    assert _cmdlines(_marked(data)) == []
    with sqlite3.connect(data / "specreg.sqlite3") as db:
        status, error = db.execute("SELECT status, error FROM runner_benchmarkrun WHERE id = 2").fetchone()
        soak, verdict, intervals = db.execute(
            "SELECT status, verdict, intervals FROM registry_stabilityresult WHERE run_id = 2"
        ).fetchone()
    assert status == "cancelled" and "worker was stopped" in error
    assert soak == "interrupted" and "SIGTERM" in verdict and "partial record is kept" in verdict
    # What was recorded before the stop is kept as it was shown (not how many requests a 5-second interval held on
    # a loaded machine: that is timing, not a promise).
    kept = json.loads(intervals)
    assert seen and kept[: len(seen)] == seen
