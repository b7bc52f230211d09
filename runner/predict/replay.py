"""With the replay tool (runner.predict.tool): the target's greedy transcript of a prompt, kept per model file
(runner.predict.kept), and llama.cpp's own speculative loop replayed against it, which gives a setting's exact
drafted and accepted counts at temperature 0 without the target decoding a single token.

The tool's options are llama-speculative-simple's, built by runner.llama.binaries from the same settings, so a replay
and
a measurement of one setting differ only in who verifies.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from inspector.spec_flags import MAX_K, Setting
from runner.llama import binaries
from runner.predict import kept
from runner.predict.tool import SPEC_TOOL, TIMEOUT_S, ReplayCancelled, ReplayError, run_tool, tool

__all__ = [
    "Replay",
    "ReplayCancelled",
    "ReplayError",
    "Transcript",
    "replay",
    "replay_argv",
    "transcript",
    "transcript_argv",
]

# How much longer a kept transcript may be and still serve a shorter one (cut): a prediction asks the length of its
# answer and its largest draft, and a draft is at most MAX_K.
LONGER_BY = MAX_K + 2


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

    def cut(self, n: int) -> Transcript:
        """The first ``n`` generated tokens of this transcript (one that ended sooner stays as it is)."""
        return Transcript(
            self.prompt, self.tokens[:n], self.margins[:n], None if self.cands is None else self.cands[:n]
        )

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
    # Per step, the tokens a checkpointed target passed through again after restoring its checkpoint (0: none), and
    # which contexts llama.cpp checkpoints ({"target": bool, "draft": bool}), as the tool's loop found them.
    replays: tuple[int, ...] = ()
    checkpoints: tuple[bool, bool] = (False, False)
    # Per step, whether the draft model drafted it (1) or another speculator of a chain did (0): in a chain the first
    # speculator with a draft is used, and only the draft model's rounds pay its decodes.
    drafters: tuple[int, ...] = ()

    @property
    def acceptance(self) -> float | None:
        """Accepted ÷ drafted tokens, as llama.cpp reports it."""
        return self.n_accept / self.n_drafted if self.n_drafted else None


def _spec_caps() -> binaries.Capabilities:
    return binaries.capabilities(binaries.find_binary(SPEC_TOOL))


def transcript_argv(exe: Path | str, target: Path | str, options: list[str], out: Path | str) -> list[str]:
    """The tool's transcript process: the target loaded as ``-m`` with ``options`` (binaries.generation_argv, whose
    ``-ngl`` is the prediction's GPU layers: runner.hardware.gpu_layers, as the benchmark's)."""
    return [str(exe), "transcript", str(out), "-m", str(target), *options]


def replay_argv(
    exe: Path | str,
    caps: binaries.Capabilities,
    target: Path | str,
    draft: Path | str | None,
    prompt: str,
    gen: binaries.GenParams,
    setting: Setting,
    script_path: Path | str,
) -> list[str]:
    """The tool's replay process: llama-speculative-simple's own options for ``setting`` (binaries.method_argv:
    ``-ngl`` for the target and the build's draft GPU-layers option for a draft file, as a benchmark passes them)."""
    argv = binaries.method_argv(caps, target, draft, prompt, gen, setting)
    return [str(exe), "replay", str(script_path), *argv[1:]]


def transcript(
    target: Path | str,
    prompt: str,
    gen: binaries.GenParams,
    *,
    task: str = "",
    timeout_s: float = TIMEOUT_S,
    should_cancel: Callable[[], bool] | None = None,
) -> Transcript:
    """The target's greedy output for ``prompt``: ``gen.n_predict`` tokens (make it longer than the replays'
    -n by their largest draft), with the margin of each token over the next best. Above temperature 0 the
    output is sampled (the options' seed) and each token carries the distribution it was sampled from.

    Kept (runner.predict.kept) per model file's sha256, build, hardware class and options (prompt, length, threads,
    context): the target runs once, and every draft, method, later prediction and worker of the class reuses
    it. ``task`` names the prompt in the record ("default/code/c1")."""
    caps = _spec_caps()
    options = binaries.generation_argv(caps, gen, prompt)
    meta = {"task": task[:200], "n_predict": gen.n_predict, "temperature": gen.temperature}
    data = kept.find(kept.TRANSCRIPTS, target, options, **meta)
    if data is not None:
        try:
            return Transcript.from_json(data)
        except (ValueError, KeyError, TypeError):
            pass  # a damaged record is made again (and replaced)
    longer = _kept_longer(target, prompt, gen, caps, meta)
    if longer is not None:
        return longer
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "transcript.json"
        run_tool(transcript_argv(tool(), target, options, out), timeout_s, None, should_cancel)
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


def _kept_longer(
    target: Path | str, prompt: str, gen: binaries.GenParams, caps: binaries.Capabilities, meta: dict[str, Any]
) -> Transcript | None:
    """A kept transcript of the same prompt and options up to LONGER_BY tokens longer, cut to ``gen.n_predict``: the
    first tokens do not depend on how far the target goes on (greedy, or sampled with the same seed: one draw per
    token in order), and the n-gram methods' K 16 asks a longer one of a target than a draft pair's K 8 then does."""
    for n in range(gen.n_predict + 1, gen.n_predict + LONGER_BY + 1):
        longer = replace(gen, n_predict=n)
        data = kept.find(
            kept.TRANSCRIPTS, target, binaries.generation_argv(caps, longer, prompt), **{**meta, "n_predict": n}
        )
        if data is None:
            continue
        try:
            return Transcript.from_json(data).cut(gen.n_predict)
        except (ValueError, KeyError, TypeError):
            continue  # damaged: another, or made afresh
    return None


def replay(
    target: Path | str,
    draft: Path | str | None,
    prompt: str,
    gen: binaries.GenParams,
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
    caps = _spec_caps()  # first, as before: a missing llama.cpp is LlamaCppNotFound, not the tool's error
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "transcript.json"
        path.write_text(script.to_json())
        argv = replay_argv(tool(), caps, target, draft, prompt, gen, setting, path)
        out = run_tool(argv, timeout_s, None, should_cancel)
    data = json.loads(out.strip().splitlines()[-1])
    ckpt = data.get("checkpoints") or {}
    return Replay(
        data["n_predict"],
        data["n_drafted"],
        data["n_accept"],
        [tuple(s) for s in data["steps"]],
        tuple(int(n) for n in data.get("replays", ())),
        (bool(ckpt.get("target")), bool(ckpt.get("draft"))),
        tuple(int(n) for n in data.get("drafters", ())),
    )
