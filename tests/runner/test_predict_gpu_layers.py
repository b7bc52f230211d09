"""Predictions offload as benchmarks do: every llama.cpp process a prediction starts (the target's
transcript, the draft's teacher-forced pass, each replay, each cost model's timing) gets runner.hardware.gpu_layers of
the machine, the figure a benchmark of the pair passes: ``-ngl`` for the model it loads as ``-m``, the build's draft
GPU-layers option (``-ngld``) for a second one. ``predict --json`` names the hardware class and the layers, and the
kept records go to the class whose timings they are. A stand-in ``nvidia-smi`` answers as an H100's does; the
offload itself is checked on a GPU machine (tests/bench/bench_gpu.py). The argument lists are built here, not run."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from inspector.llama_flags import ALL_GPU_LAYERS, PINNED_SERVER_HELP, Capabilities, capabilities_from_help
from inspector.spec_flags import Setting, uses_draft_file
from runner import hardware
from runner.llama import binaries
from runner.management.commands.predict import json_answer
from runner.models import CostMeasurement
from runner.predict import forced, kept, prediction, replay
from tests import needs
from tests.gpu_standins import H100_SMI, smi_on_path

ROOT = Path(__file__).resolve().parents[2]
TARGET, DRAFT, PROMPT = "/models/target.gguf", "/models/draft.gguf", "Write a haiku about GPUs."
DRAFT_SETTING = Setting("draft-simple", 4, 0.75, ())
NGRAM_SETTING = Setting("ngram-mod", 8, None, ())
EXE = Path("/cache/replay/specreg-replay")  # the tool's path only names it: nothing is run


@pytest.fixture(autouse=True)
def _this_machine_asked_afresh(monkeypatch):
    """No override unless a test sets one, and this machine described anew: kept caches its description per process,
    and a stand-in GPU must neither leak into later tests nor be hidden by an earlier test's machine."""
    monkeypatch.delenv("SPECREG_GPU_LAYERS", raising=False)
    kept._described.cache_clear()
    yield
    kept._described.cache_clear()


@pytest.fixture
def h100(tmp_path, monkeypatch) -> None:
    """``nvidia-smi`` on PATH, answering as a machine with one H100 (tests/runner/test_gpu_plan.py's stand-in)."""
    smi_on_path(tmp_path, monkeypatch, H100_SMI)


@pytest.fixture
def no_gpu(tmp_path, monkeypatch) -> None:
    """An ``nvidia-smi`` that answers as a machine without an NVIDIA GPU does (it fails), whatever this one has."""
    smi_on_path(tmp_path, monkeypatch, "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")


@pytest.fixture(params=["pinned", pytest.param("installed", marks=pytest.mark.llama)])
def caps(request) -> Capabilities:
    """llama-speculative-simple's options, whose parser the replay tool uses: the pinned build's (its common and
    speculative options, -ngl and -ngld among them, as the pinned help lists them), and the installed build's."""
    if request.param == "pinned":
        return capabilities_from_help(Path("llama-speculative-simple"), PINNED_SERVER_HELP.read_text())
    try:
        return binaries.capabilities(binaries.find_binary(replay.SPEC_TOOL))
    except binaries.LlamaCppNotFound:
        needs.missing("llama.cpp (llama-speculative-simple)")
        raise  # unreachable: missing() skips or fails


def _value(argv: list[str], flag: str | None) -> str | None:
    """The value after ``flag`` in ``argv``, None when the flag is absent."""
    if flag is None or flag not in argv:
        return None
    return argv[argv.index(flag) + 1]


def benchmark_argv(caps: Capabilities, hw: dict, setting: Setting) -> list[str]:
    """The llama-speculative-simple process a benchmark of the pair runs on the machine ``hw`` describes: execute
    passes hardware.gpu_layers(hw) into its sweep, and each cell into its processes' GenParams (runner.measure.cli)."""
    gen = binaries.GenParams(32, gpu_layers=hardware.gpu_layers(hw))
    return binaries.method_argv(caps, TARGET, DRAFT, PROMPT, gen, setting)


def prediction_argvs(caps: Capabilities, hw: dict) -> dict[str, list[str]]:
    """Every kind of process a prediction of the pair starts on that machine, as predict() builds them: the options
    from offload_for(hw) and generation_params, a task's context, and a cost model's own length and context."""
    gen = prediction.generation_params(prediction.offload_for(hw), 32, None, 0.0)
    task_gen = replace(gen, ctx_size=2048)
    timed = binaries.generation_argv(caps, replace(gen, ctx_size=2048, n_predict=1), "x")
    argvs = {
        "transcript": replay.transcript_argv(EXE, TARGET, binaries.generation_argv(caps, task_gen, PROMPT), "t.json"),
        "forced": forced.forced_argv(EXE, DRAFT, binaries.generation_argv(caps, task_gen, PROMPT), "t.json", "f.json"),
        "timing target": prediction.timing_argv(EXE, TARGET, timed, "c.json"),
        "timing draft": prediction.timing_argv(EXE, DRAFT, timed, "c.json"),
    }
    for s in (DRAFT_SETTING, NGRAM_SETTING):
        draft = DRAFT if uses_draft_file(s.method) else None
        argvs[f"replay {s.label}"] = replay.replay_argv(EXE, caps, TARGET, draft, PROMPT, task_gen, s, "t.json")
    return argvs


def assert_offloaded_alike(caps: Capabilities, hw: dict, expected: str | None) -> None:
    """Every prediction process: ``-ngl`` as the benchmark's for its ``-m`` model, the benchmark's draft option for a
    ``-md`` one, nothing where the benchmark passes nothing."""
    bench = benchmark_argv(caps, hw, DRAFT_SETTING)
    assert _value(bench, "-ngl") == expected and _value(bench, caps.draft_gpu_layers_flag) == expected
    for name, argv in prediction_argvs(caps, hw).items():
        assert argv[0] == str(EXE) and _value(argv, "-m") in (TARGET, DRAFT), name
        assert _value(argv, "-ngl") == _value(bench, "-ngl"), name
        if _value(argv, caps.model_draft_flag) == DRAFT:  # a second model: the replay of a draft-model setting
            assert _value(argv, caps.draft_gpu_layers_flag) == _value(bench, caps.draft_gpu_layers_flag), name
        else:
            assert caps.draft_gpu_layers_flag not in argv, name


def test_every_process_of_a_prediction_offloads_as_the_benchmark_does_on_an_h100(h100, caps):
    hw = hardware.detect("cuda")  # a CUDA build on the stand-in's H100, as execute describes the machine
    assert hw["hardware_class"] == "gpu-nvidia-h100" and hardware.gpu_layers(hw) == ALL_GPU_LAYERS
    assert caps.draft_gpu_layers_flag is not None  # the pinned build names the draft's layers (-ngld)
    assert_offloaded_alike(caps, hw, str(ALL_GPU_LAYERS))
    # The forced pass loads the draft as its model: -ngl offloads the draft there, as -ngld does in a benchmark.
    argvs = prediction_argvs(caps, hw)
    assert _value(argvs["forced"], "-m") == DRAFT and _value(argvs["forced"], "-ngl") == str(ALL_GPU_LAYERS)
    assert _value(argvs["timing draft"], "-m") == DRAFT and _value(argvs["timing draft"], "-ngl") == str(ALL_GPU_LAYERS)


@pytest.mark.parametrize("value", ["20", "0"])
def test_specreg_gpu_layers_overrides_prediction_and_benchmark_alike(h100, caps, monkeypatch, value):
    monkeypatch.setenv("SPECREG_GPU_LAYERS", value)
    assert_offloaded_alike(caps, hardware.detect("cuda"), value)


def test_specreg_gpu_layers_overrides_them_on_a_machine_without_a_gpu_too(no_gpu, caps, monkeypatch):
    monkeypatch.setenv("SPECREG_GPU_LAYERS", "all")
    assert_offloaded_alike(caps, hardware.detect("cpu"), str(ALL_GPU_LAYERS))


@pytest.mark.parametrize("machine,backend", [("no_gpu", "cpu"), ("no_gpu", "cuda"), ("h100", "cpu")])
def test_without_a_gpu_that_llama_cpp_uses_no_process_is_given_gpu_layers(request, caps, machine, backend):
    """No GPU, or a CPU-only build on a GPU machine: options as before, so records kept on the CPU stay valid."""
    request.getfixturevalue(machine)
    hw = hardware.detect(backend)
    assert hw["hardware_class"].startswith("cpu-") and prediction.offload_for(hw).gpu_layers is None
    assert_offloaded_alike(caps, hw, None)
    for name, argv in prediction_argvs(caps, hw).items():
        assert "-ngl" not in argv, name


def test_predict_json_names_the_hardware_class_and_gpu_layers(h100):
    hw = {**hardware.detect("cuda"), "llama_isa": "avx2"}
    run = prediction.PredictionRun([], {}, {"transcript": 1.0}, prediction.offload_for(hw))
    out = json.loads(json.dumps(json_answer(run, {"draft-eagle3": prediction.NOT_YET}, 0.0)))
    assert out["hardware_class"] == "gpu-nvidia-h100" and out["measurement_class"] == "gpu-nvidia-h100/avx2"
    assert out["gpu_layers"] == ALL_GPU_LAYERS == hardware.gpu_layers(hw)
    assert out["not_predictable"][0]["method"] == "draft-eagle3" and out["temperature"] == 0.0


def test_predict_json_says_null_gpu_layers_on_the_cpu(no_gpu):
    hw = {**hardware.detect("cpu"), "llama_isa": "avx2"}
    out = json_answer(prediction.PredictionRun([], {}, {}, prediction.offload_for(hw)), {}, 0.0)
    assert out["gpu_layers"] is None and out["hardware_class"] == hw["hardware_class"]
    assert out["measurement_class"] == f"{hw['hardware_class']}/avx2"


@pytest.fixture
def cuda_build(monkeypatch) -> None:
    """The installed build as a CUDA one of the pinned version describes itself (runner.llama.binaries.build_backend
    reads that from its files; tests/runner/test_gpu_plan.py checks the reading): nothing of it is run."""
    monkeypatch.setattr(kept, "build_backend", lambda: "cuda")
    monkeypatch.setattr(kept, "installed_isa", lambda: "avx2")
    monkeypatch.setattr(kept, "installed_version", lambda: "11434.0.0+avx2.cuda.0123abcd")
    monkeypatch.delenv(binaries.ENV_BIN_DIR, raising=False)


@pytest.mark.django_db
def test_a_prediction_here_offloads_and_keeps_its_records_under_the_gpu_class(h100, cuda_build, tmp_path, monkeypatch):
    """``manage.py predict`` (no run, so no benchmark's description) takes this machine as kept keys its records:
    the GPU's class and layers, and its cost models and transcripts are recorded under that class."""
    monkeypatch.setenv("SPECREG_CACHE_DIR", str(tmp_path / "cache"))
    where = prediction.offload_for()
    assert where.gpu_layers == ALL_GPU_LAYERS and where.hardware_class == "gpu-nvidia-h100"
    assert where.measurement_class == kept.this_machine().hardware_class == "gpu-nvidia-h100/avx2"
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(64))  # kept hashes the file; nothing reads it as a model here
    options = ["-ngl", str(where.gpu_layers), "-c", "2048"]
    kept.keep(kept.COSTS, model, options, {"depth": 256, "seconds": [0.001]}, threads=None, depth=256)
    row = CostMeasurement.objects.get()
    assert row.hardware_class == where.measurement_class
    assert CostMeasurement.objects.filter(kept.on_class("gpu-nvidia-h100")).count() == 1
    assert not CostMeasurement.objects.filter(kept.on_class("cpu-2c")).exists()
    # other GPU layers are other options: a cost model taken on the CPU of this machine is not reused for the GPU
    assert kept.find(kept.COSTS, model, ["-ngl", "0", "-c", "2048"]) is None
    assert kept.find(kept.COSTS, model, options) == {"depth": 256, "seconds": [0.001]}


def _manage_predict(tmp_path: Path, env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env |= {"SPECREG_DATA_DIR": str(tmp_path / "data"), **env_extra}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return subprocess.run(
        [sys.executable, "manage.py", "predict", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.llama
@pytest.mark.slow  # a real prediction: about 3 minutes on 2 cores, the replay tool built
def test_a_real_prediction_says_what_it_offloaded_and_records_under_its_class(h100, tmp_path, smollm2_path):
    """The real command with the H100 stand-in on PATH and an override: its processes run (the CPU build ignores
    -ngl 0), its JSON names the layers they were given and its class, and its cost model is kept under that class."""
    r = _manage_predict(
        tmp_path, {"SPECREG_GPU_LAYERS": "0"}, str(smollm2_path), "--methods", "ngram-mod", "--tasks", "code",
        "--prompts-per-type", "1", "--n-predict", "8", "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["gpu_layers"] == 0  # the override, as a benchmark on this machine would pass it
    # the class of this machine with the stand-in's H100: a GPU one only where the build offloads (a CUDA build)
    expected = hardware.detect(binaries.build_backend())["hardware_class"]
    assert out["hardware_class"] == expected and out["measurement_class"].startswith(expected)
    with sqlite3.connect(tmp_path / "data" / "specreg.sqlite3") as db:
        classes = {c for (c,) in db.execute("SELECT hardware_class FROM runner_costmeasurement")}
        classes |= {c for (c,) in db.execute("SELECT hardware_class FROM runner_kepttranscript")}
    assert classes == {out["measurement_class"]}
