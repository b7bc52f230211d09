"""The fast path for draft models: one teacher-forced pass of the draft instead of a replay per setting.

At temperature 0 a draft step sees exactly the true prefix up to its first miss (the draft's context holds the
prompt and the accepted tokens when the step begins), so the draft's top token and probability at every
position of the target's transcript, taken once in one batched pass (``specreg-replay forced``), give every
step's accepted count for every K and p-min at once. Only what the draft proposes *after* a miss (which sets
the drafted count when p-min > 0) needs its own continuation; the tool takes those too, where the missed
token was confident enough to be drafted. ``steps`` below then walks llama-speculative-simple's loop exactly as
runner/replay/specreg_replay.cpp does (draft caps, p-min cut, verify, bonus token, end of generation).

Above temperature 0 (``expected``) the same pass over a sampled transcript, with the target's distribution at
every position, gives the expected counts.

The pass and the replay can still differ where the draft's top two tokens nearly tie: a batch of 128 tokens
and the replay's small batches round differently. tests/runner/test_replay.py and tests/bench/bench_predict.py count
how often; ``predict --exact`` replays every setting instead.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inspector.spec_flags import Setting
from runner.llama import binaries
from runner.predict import replay


@dataclass(frozen=True)
class Forced:
    top: list[int]  # the draft's top token at transcript position i, given the prompt and tokens[:i]
    p: list[float]  # its probability as p-min compares it (softmax over the draft sampler's top 10)
    gap: list[float]  # that probability minus the second best's: a small gap is a near-tie
    cont: dict[int, list[float]]  # after a drafted miss at i: the probabilities of the draft's continuation


def forced_argv(exe: Path | str, draft: Path | str, options: list[str], src: Path | str, out: Path | str) -> list[str]:
    """The tool's forced pass: the draft is the model it loads (``-m``), so the generation options' ``-ngl`` (the
    prediction's GPU layers, binaries.generation_argv) offload the draft as a benchmark's ``-ngld`` does."""
    return [str(exe), "forced", str(src), str(out), "-m", str(draft), *options]


def forced_pass(
    draft: Path | str,
    prompt: str,
    gen: binaries.GenParams,
    script: replay.Transcript,
    max_k: int,
    p_cont: float,
    *,
    ended: bool,
    timeout_s: float = replay.TIMEOUT_S,
    should_cancel: Callable[[], bool] | None = None,
) -> Forced:
    """The draft's teacher-forced pass over ``script``; continuations after misses with p >= ``p_cont`` > 0.
    ``ended``: the transcript stops at the target's end-of-generation token (the caller knows: it is shorter than
    asked), so the draft drafts on past it; the draft's own vocabulary does not decide that (an adapted draft may
    not know the target's end token as one)."""
    caps = binaries.capabilities(binaries.find_binary(replay.SPEC_TOOL))
    options = binaries.generation_argv(caps, gen, prompt)
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "transcript.json", Path(d) / "forced.json"
        src.write_text(script.to_json())
        env = {**os.environ, "SPECREG_FORCED": f"{max_k},{p_cont:g},{int(ended)}"}
        replay.run_tool(forced_argv(replay.tool(), draft, options, src, out), timeout_s, env, should_cancel)
        data = json.loads(out.read_text())
    cont = {int(row[0]): [float(q) for q in row[1:]] for row in data["cont"]}
    return Forced([int(t) for t in data["top"]], [float(q) for q in data["p"]], [float(g) for g in data["gap"]], cont)


def _draft(f: Forced, truth: list[int], at: int, cap: int, p_min: float, ended: bool) -> tuple[int, int]:
    """One draft from transcript position ``at`` [sp:396-447]: the tokens drafted (it stops below p-min, where
    the token is not drafted, or at ``cap``) and how many of them lead equal to the transcript."""
    drafted, matched, miss, c = 0, 0, -1, 0
    while True:
        if miss < 0 and at + drafted >= len(truth):
            if not ended:
                raise replay.ReplayError("the transcript ends before the run does; make it longer")
            miss = len(truth) - 1  # past the end of generation the draft goes on with its own tokens
        if miss < 0:
            j = at + drafted
            q = f.p[j]
        elif p_min > 0:
            more = f.cont.get(miss)
            if more is None or c >= len(more):
                raise replay.ReplayError(f"the forced pass has no continuation after position {miss}")
            q, c = more[c], c + 1
        else:
            q = 1.0  # p-min 0 drafts to the cap whatever the draft proposes
        if q < p_min:
            return drafted, matched
        drafted += 1
        if miss < 0:
            if f.top[j] == truth[j]:
                matched += 1
            else:
                miss = j
        if drafted >= cap:
            return drafted, matched


def _cap(k: int, n_ctx: int, n_past: int, n_predict: int, produced: int) -> int:
    """[ss:186-202] the step's draft budget; llama.cpp caps a draft by it only when it is positive [sp:2913]."""
    budget = max(min(n_ctx - n_past - 2, n_predict - produced - 1), 0)
    return k if budget <= 0 else min(k, budget)


def steps(
    f: Forced, script: replay.Transcript, setting: Setting, n_predict: int, n_ctx: int, ended: bool
) -> replay.Replay:
    """The replay's counts for ``setting`` from the forced pass (temperature 0). ``ended``: the transcript stops
    at the target's end-of-generation token (it is shorter than asked), so its last token ends the run."""
    truth = script.tokens
    eog = len(truth) - 1 if ended else -1
    at, n_past, drafted_all, accepted_all = 0, len(script.prompt) - 1, 0, 0
    out: list[tuple[int, int]] = []
    while True:
        cap = _cap(setting.k, n_ctx, n_past, n_predict, at)
        drafted, acc = _draft(f, truth, at, cap, setting.p_min or 0.0, ended)
        # [ss:258] verify: the matching prefix (ending at an end-of-generation token), then the target's token
        n_acc = eog - at + 1 if 0 <= eog - at < acc else acc
        has_eos = eog >= 0 and at + n_acc - 1 == eog
        emitted = n_acc
        if not has_eos:
            if at + n_acc >= len(truth):
                raise replay.ReplayError("the transcript ends before the run does; make it longer")
            emitted += 1
            has_eos = at + n_acc == eog
        at += emitted
        n_past += 1 + n_acc
        drafted_all += drafted
        accepted_all += n_acc
        out.append((drafted, n_acc))
        if at > n_predict or has_eos:  # [ss:339]
            break
    return replay.Replay(at, drafted_all, accepted_all, out)


@dataclass(frozen=True)
class Expected:
    """A setting's expected counts above temperature 0 (``expected``)."""

    n_predict: float
    n_drafted: float
    n_accept: float
    steps: list[tuple[float, int]]  # (the chance the run takes a step at a position, the tokens it drafts there)

    @property
    def acceptance(self) -> float | None:
        return self.n_accept / self.n_drafted if self.n_drafted else None


def expected(
    f: Forced, script: replay.Transcript, setting: Setting, n_predict: int, n_ctx: int, ended: bool
) -> Expected:
    """Above temperature 0 the pinned llama.cpp still drafts greedily (``--spec-draft-sampling greedy``, its
    default) and verifies by sampling the target and matching: a drafted token is accepted with the target's
    probability of it. Along a sampled transcript (``script.cands``: the distribution of every position) and
    the draft's forced pass over it, each step's accepted count is a chain of those probabilities, and the
    chance of a step beginning at each position follows from the steps before it: expected drafted, accepted
    and emitted tokens, and each step's weight for the cost model. Where a draft's token was accepted although
    the transcript took another, the context leaves the transcript: the tokens after it are taken at the
    transcript's mean acceptance (the one approximation; tests/bench/bench_predict.py measures the error)."""
    if script.cands is None:
        raise replay.ReplayError("the transcript was made at temperature 0: it carries no distributions")
    truth = script.tokens
    dist = [dict(zip(row[0::2], row[1::2], strict=False)) for row in script.cands]
    alpha = [dist[j].get(float(f.top[j]), 0.0) for j in range(len(truth))]
    mean_alpha = sum(alpha) / len(alpha) if alpha else 0.0
    eog = len(truth) - 1 if ended else len(truth) + setting.k + 2
    start = [0.0] * (len(truth) + setting.k + 3)
    start[0] = 1.0
    drafted_all = accepted_all = emitted_all = 0.0
    out: list[tuple[float, int]] = []
    for at in range(min(n_predict, len(truth) - 1) + 1):
        w = start[at]
        if w <= 0.0:
            continue
        cap = _cap(setting.k, n_ctx, len(script.prompt) - 1 + at, n_predict, at)
        drafted, matched = _draft(f, truth, at, cap, setting.p_min or 0.0, ended)
        chain = 1.0  # the chance that the first i drafted tokens are all accepted
        for i in range(drafted + 1):
            a = 0.0 if i == drafted else (alpha[at + i] if i <= matched and at + i < len(alpha) else mean_alpha)
            exactly = chain * (1.0 - a)  # i accepted, then the target's own token
            accepted_all += w * exactly * i
            emitted_all += w * exactly * (i + 1)
            nxt = at + i + 1
            if nxt <= n_predict and nxt <= eog:  # [ss:339] another step follows
                start[nxt] += w * exactly
            chain *= a
        drafted_all += w * drafted
        out.append((w, drafted))
    return Expected(emitted_all, drafted_all, accepted_all, out)
