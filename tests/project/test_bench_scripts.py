"""The benchmark scripts the README names run from a clone: each in its quick mode, with a tiny real measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import missing

ROOT = Path(__file__).resolve().parents[2]


def _bench(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    """A benchmark script run from the clone as a user would, with a data folder of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env["SPECREG_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run(
        [sys.executable, f"tests/bench/{name}.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.llama
@pytest.mark.parametrize("via", ["cli", "server"])
def test_bench_methods_quick_runs_every_import_and_measures(tmp_path, smollm2_path, via):
    r = _bench(tmp_path, "bench_methods", "--quick", "--via", via)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    rows = [line for line in r.stdout.splitlines() if line.startswith("| code |")]
    assert len(rows) == 2 and "draft-simple K=2" in rows[0], r.stdout
    assert "t/s" not in rows[0].split("|")[3] and float(rows[0].split("|")[3].split()[0]) > 0  # a real plain speed
    assert f"measured via {via}" in r.stdout and "built for" in r.stdout


@pytest.mark.llama
def test_bench_predict_quick_sets_predictions_beside_measurements(tmp_path, smollm2_path):
    r = _bench(tmp_path, "bench_predict", "--quick")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    rows = [line.split("|") for line in r.stdout.splitlines() if line.startswith("| code |")]
    assert [c[2].strip() for c in rows] == ["draft-simple K=2 p-min=0", "ngram-mod K=16"], r.stdout
    draft = rows[0]
    assert float(draft[3].strip().rstrip("%")) > 50 and float(draft[6].strip().rstrip("x")) > 0  # measured for real
    assert "once the transcript exists" in r.stdout and "## All" in r.stdout


@pytest.mark.slow
def test_bench_crawl_small_reads_headers_only_once(tmp_path, smollm2_path, qwen05_header_path, gemma3_header_path):
    """A crawl of 3 repositories of 2 files through a real worker: the figures print, the headers are read at most
    1.05 times, and the second crawl reads none (it needs PostgreSQL, as the benchmark measures on it)."""
    import psycopg

    try:
        psycopg.connect("postgres://postgres@127.0.0.1:5432/postgres", connect_timeout=3).close()
    except psycopg.OperationalError:
        missing("PostgreSQL on 127.0.0.1:5432")
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    r = subprocess.run(
        [
            sys.executable,
            "tests/bench/bench_crawl.py",
            "--repos",
            "3",
            "--files-per-repo",
            "2",
            "--db",
            "specreg_crawl_test",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    ratios = [float(line.rsplit("= ", 1)[1].rstrip("x")) for line in r.stdout.splitlines() if "MB of headers =" in line]
    assert len(ratios) == 1 and 1.0 <= ratios[0] <= 1.05, r.stdout
    assert "6 added" in r.stdout and "6 unchanged" in r.stdout and "files/hour" in r.stdout


@pytest.mark.llama
def test_bench_load_quick_measures_one_and_two_clients(tmp_path, smollm2_path):
    r = _bench(tmp_path, "bench_load", "--quick")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    rows = [line.split("|") for line in r.stdout.splitlines() if line.startswith("| code |")]
    assert [(x[2].strip(), x[3].strip()) for x in rows] == [
        ("draft-simple K=4 p-min=0", "1"),
        ("draft-simple K=4 p-min=0", "2"),
        ("ngram-mod K=16 ngram-mod-n-match=24", "1"),
        ("ngram-mod K=16 ngram-mod-n-match=24", "2"),
    ], r.stdout
    assert all(float(x[4]) > 0 and float(x[5]) > 0 and float(x[12]) > 0 for x in rows)  # speeds, server CPU


@pytest.mark.llama
def test_bench_gpu_quick_dry_run_sets_a_random_models_predictions_beside_cpu_measurements(tmp_path, qwen05_header_path):
    """The GPU check's quick dry run: a random model of Qwen2.5's vocabulary (read from the 0.5B's header) drafts for
    itself through manage.py predict and run_benchmark on this CPU, labelled a CPU figure, never a GPU one."""
    paths = ("--carry", str(tmp_path / "carry"), "--work", str(tmp_path / "work"), "--out", str(tmp_path / "out"))
    r = _bench(tmp_path, "bench_gpu", "--dry-run", "--quick", *paths)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
    rows = [line.split("|") for line in r.stdout.splitlines() if line.startswith("| cpu-")]
    assert [c[5].strip() for c in rows] == ["draft-simple K=2 p-min=0", "ngram-cache K=8"], r.stdout
    assert rows[0][2].strip() == "self" and rows[0][7].strip() == "100.0%"  # it accepts every token it drafts
    assert float(rows[0][9].strip().rstrip("x")) > 0 and "gpu-" not in r.stdout.split("## Predicted")[1]
    assert "these are CPU figures, not GPU ones" in r.stdout
    state = json.loads((tmp_path / "out" / "gpu-measure.json").read_text())
    assert state["dry_run"] and state["label"].startswith("cpu-") and len(state["rows"]) == 2
