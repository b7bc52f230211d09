"""GPU builds and GPU machines without a GPU here: the build plan for a CUDA backend and its cache
key, which class a machine is in when its build can or cannot offload, how many layers a process offloads, and how
a CUDA build's smoke check reads llama.cpp's load log. A stand-in ``nvidia-smi`` answers as an H100's does; the
build itself, and the offload, are checked on a GPU machine (tests/bench/bench_gpu.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from inspector.llama_flags import ALL_GPU_LAYERS
from runner import hardware
from runner.llama import binaries, build
from runner.llama.isa import cuda_architectures
from runner.llama.smoke import _not_offloaded, smoke
from tests.gpu_standins import H100_SMI, smi_on_path

AVX2 = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}


@pytest.fixture(autouse=True)
def _nothing_asked(monkeypatch):
    for name in (build.ENV_ISA, build.ENV_CMAKE_ARGS, build.ENV_BACKEND, build.ENV_CUDA_ARCH, "SPECREG_GPU_LAYERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(build, "_recorded", lambda field: None)


@pytest.fixture
def h100(tmp_path, monkeypatch) -> Path:
    """``nvidia-smi`` on PATH, answering as a machine with one H100."""
    return smi_on_path(tmp_path, monkeypatch, H100_SMI)


@pytest.fixture
def no_gpu(tmp_path, monkeypatch) -> None:
    """A PATH on which no ``nvidia-smi`` answers."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))


def _opts(p: build.Plan) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in p.cmake_args if a.startswith("-D"))


def test_a_cuda_plan_builds_for_the_gpus_architecture_beside_the_cpu_instruction_set(h100):
    cpu = build.plan(flags=AVX2, amx="absent")
    cuda = build.plan(flags=AVX2, amx="absent", backend="cuda")
    assert cpu.backend == "cpu" and "GGML_CUDA" not in _opts(cpu)
    opts = _opts(cuda)
    assert opts["GGML_CUDA"] == "ON" and opts["CMAKE_CUDA_ARCHITECTURES"] == "90"  # the H100's 9.0, not every arch
    assert opts["LLAMA_USE_PREBUILT_UI"] == "OFF"  # a GPU machine may have no network at build time
    assert opts["GGML_AVX2"] == "ON" and opts["GGML_NATIVE"] == "OFF"  # ggml-cpu still needs its instruction set
    # The wheel cache and the installed version tell the two builds apart.
    assert cuda.key != cpu.key and ".cuda." in cuda.local_version and ".cuda." not in cpu.local_version
    assert cuda.local_version.startswith(f"{build.PINNED_VERSION}+avx2.cuda.")
    assert build.plan(flags=AVX2, amx="absent", backend="cuda", cuda_arch="86;89").key != cuda.key


def test_the_backend_and_architecture_come_from_the_environment_and_are_checked(h100, monkeypatch):
    monkeypatch.setenv(build.ENV_BACKEND, "CUDA")
    monkeypatch.setenv(build.ENV_CUDA_ARCH, "89")
    assert _opts(build.plan(flags=AVX2, amx="absent"))["CMAKE_CUDA_ARCHITECTURES"] == "89"
    monkeypatch.setenv(build.ENV_CUDA_ARCH, "90; rm -rf /")
    with pytest.raises(build.BuildError, match="expected CUDA architectures"):
        build.plan(flags=AVX2, amx="absent")
    monkeypatch.setenv(build.ENV_BACKEND, "rocm")
    with pytest.raises(build.BuildError, match="is not one of: cpu, cuda"):
        build.plan(flags=AVX2, amx="absent")


def test_a_cuda_plan_without_a_gpu_asks_for_the_architecture_in_one_line(no_gpu):
    assert cuda_architectures() == ""
    with pytest.raises(build.BuildError) as e:
        build.plan(flags=AVX2, amx="absent", backend="cuda")
    assert build.ENV_CUDA_ARCH in str(e.value) and "\n" not in str(e.value)
    assert _opts(build.plan(flags=AVX2, amx="absent", backend="cuda", cuda_arch="90"))["GGML_CUDA"] == "ON"


def test_a_later_install_keeps_the_backend_once_asked_for(h100, monkeypatch):
    monkeypatch.setattr(build, "_recorded", lambda field: "cuda" if field == "backend" else None)
    assert build.plan(flags=AVX2, amx="absent").backend == "cuda"


def test_an_offline_build_uses_this_environments_build_tools(tmp_path, monkeypatch):
    """SPECREG_LLAMA_OFFLINE=1: pip builds without isolation (nothing fetched). pip is stood in for: what it is
    asked is the point here; the real build runs in `make test` and on a GPU machine."""
    monkeypatch.setenv("SPECREG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "pinned_sdist", lambda log=print: tmp_path / "sdist.tar.gz")
    asked: list[list[str]] = []

    class Done:
        returncode, stdout = 1, "stopped here"

    monkeypatch.setattr(build.subprocess, "run", lambda argv, **kw: asked.append(argv) or Done())
    p = build.plan(flags=AVX2, amx="absent")
    for offline in ("", "1"):
        monkeypatch.setenv(build.ENV_OFFLINE, offline)
        with pytest.raises(build.BuildError, match="stopped here"):
            build.wheel_for(p, log=lambda line: None)
    assert "--no-build-isolation" not in asked[0] and "--no-build-isolation" in asked[1]


def test_a_gpu_machine_is_a_gpu_class_only_when_its_build_offloads(h100, monkeypatch):
    cores = hardware.detect("cpu")["cpu_cores"]
    assert hardware.detect("cuda")["hardware_class"] == "gpu-nvidia-h100"
    assert hardware.detect("")["hardware_class"] == "gpu-nvidia-h100"  # a build of unknown backend: as it says
    cpu_only = hardware.detect("cpu")
    assert cpu_only["hardware_class"] == f"cpu-{cores}c" and cpu_only["gpus"][0]["name"].startswith("NVIDIA H100")
    assert hardware.gpu_layers(hardware.detect("cuda")) == ALL_GPU_LAYERS
    assert hardware.gpu_layers(cpu_only) is None
    monkeypatch.setenv("SPECREG_GPU_LAYERS", "20")
    assert hardware.gpu_layers(hardware.detect("cuda")) == 20 and hardware.gpu_layers(cpu_only) == 20
    monkeypatch.setenv("SPECREG_GPU_LAYERS", "0")
    assert hardware.gpu_layers(hardware.detect("cuda")) == 0


def test_a_machine_without_a_gpu_offloads_nothing(no_gpu):
    info = hardware.detect("cuda")
    assert info["gpus"] == [] and info["hardware_class"].startswith("cpu-") and hardware.gpu_layers(info) is None


def test_the_backend_of_a_build_is_read_from_its_files(tmp_path):
    cpu, cuda = tmp_path / "cpu" / "bin", tmp_path / "cuda" / "bin"
    for d in (cpu, cuda):
        d.mkdir(parents=True)
        (d / "libggml-cpu.so").write_bytes(b"")
    (tmp_path / "cuda" / "lib").mkdir()
    (tmp_path / "cuda" / "lib" / "libggml-cuda.so.0").write_bytes(b"")  # a CMake install keeps it in ../lib
    assert binaries.build_backend(cpu) == "cpu" and binaries.build_backend(cuda) == "cuda"


def test_a_cuda_builds_smoke_check_reads_the_offload_from_the_load_log():
    assert _not_offloaded("load_tensors: offloaded 3/3 layers to GPU\n") == ""
    assert _not_offloaded("load_tensors: offloaded 1/3 layers to GPU") == "it offloaded 1/3 layers of the tiny model"
    assert "no GPU answered" in _not_offloaded("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device")
    assert _not_offloaded("llama_model_load: ...") == "it offloaded nothing to a GPU"


def test_a_cuda_builds_smoke_check_asks_for_the_load_log_it_reads(tmp_path):
    """On an H200 (2026-11-27) the pinned llama-completion printed its "offloaded N/N layers" line only at -lv 4, and
    the check refused a working CUDA build. A stand-in build with that logging: the check passes only if it asks."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "libggml-cuda.so").write_bytes(b"")  # what makes a build a CUDA one (binaries.build_backend)
    exe = bin_dir / "llama-completion"
    exe.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -ngl 99 "*"-lv 4 "*) echo "load_tensors: offloaded 3/3 layers to GPU" >&2;; esac\n'
        "echo hello\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    result = smoke(binary=exe)
    assert result.ok, result.message
    exe.write_text("#!/bin/sh\necho hello\n")  # a build that loads on the CPU whatever it is asked
    result = smoke(binary=exe)
    assert not result.ok and result.message.endswith("is a CUDA build but it offloaded nothing to a GPU")
