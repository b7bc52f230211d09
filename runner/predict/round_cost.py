"""Real speculative rounds of a pair, timed by llama.cpp: what the cost model's parts leave out.

The cost model (runner.predict.prediction) times decodes and sampling, each alone. A real round pays more: the loop's
bookkeeping (cache trims, batch building, the sampler's state), the two models slowing each other as they alternate,
and on a GPU each step's launches and synchronisations, which can cost as much as several decodes (llama.cpp
#25908). This module runs ``llama-speculative-simple`` with the pair itself (draft-simple, K = ROUND_K, p-min 0) and
keeps what it printed: the decode loop's seconds, its rounds (n_decoded − n_accept: each round yields its accepted
tokens and one of the target's) and its drafted tokens. runner.predict.prediction subtracts the modelled parts and
keeps the rest per llama.cpp decode call, ``CostModel.extra_per_call_s`` (shown per round of K tokens).

Why p-min 0: the draft then proposes K tokens every round whatever the target accepts (only the generation budget's
last rounds draft fewer), so each round's modelled part is known without a transcript. Why the pair's own draft and
not one standard run: what a round leaves out depends on the draft, and another draft's residual added to the pair's
rounds makes the prediction worse than none. Kept like a cost model (runner.predict.kept): per target file, draft
file (its sha256 in the options), build, options and machine.

(figures: docs/benchmarks.md, "Figures behind design choices")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from inspector.spec_flags import Setting
from runner.llama import binaries, output, procs
from runner.predict import conditions, kept
from runner.predict.conditions import MAX_SPREAD, Conditions, quietly, spread_of
from runner.predict.tool import ReplayCancelled, ReplayError
from runner.state import checkpointed

ROUND_K = 4  # a short draft: most rounds of a real pair, and cheap to time
FIT_K = 8  # a second, longer draft: how a round's residual grows with K is fitted from the two (``fit``)
ROUND_TOKENS = 48  # about ten rounds per run
ROUND_REPEATS = 3  # the median run; their spread says whether the machine was steady (runner.predict.conditions)
# Text to continue: about 250 tokens with common tokenizers, so that the rounds run near the cost model's context
# depth (runner.predict.prediction.COST_DEPTH): decodes at another depth cost another time.
ROUND_PROMPT = (
    "The following is a plain account of how a river shapes the valley it runs through, written for readers who "
    "have never studied geology. " * 9
)


@dataclass(frozen=True)
class RoundRun:
    """One timed run of the pair (llama-speculative-simple's printed figures)."""

    k: int
    decode_s: float  # the decode loop, drafting and verifying; the prompt excluded
    n_decoded: int
    n_drafted: int
    n_accept: int
    n_encoded: int  # prompt tokens: the context depth the rounds start at
    # A checkpointed target's rounds, counted from the debug log (runner.llama.output.round_steps): (drafted,
    # accepted, replayed) each; empty for a KV cache's, whose rounds follow from the totals.
    steps: tuple[tuple[int, int, int], ...] = ()

    @property
    def rounds(self) -> int:
        return len(self.steps) if self.steps else self.n_decoded - self.n_accept

    def drafted_per_round(self) -> list[int]:
        """Each round's drafted count: full drafts of K (p-min 0 never stops a draft early), one remainder, and
        rounds that drafted nothing (the generation budget's last token)."""
        if self.steps:
            return [d for d, _, _ in self.steps]
        full, rest = divmod(self.n_drafted, self.k)
        steps = [self.k] * full + ([rest] if rest else [])
        return steps + [0] * max(0, self.rounds - len(steps))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"steps": [list(step) for step in self.steps]}  # as JSON keeps them

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundRun:
        return cls(
            int(data["k"]),
            float(data["decode_s"]),
            int(data["n_decoded"]),
            int(data["n_drafted"]),
            int(data["n_accept"]),
            int(data.get("n_encoded", 0)),
            tuple(tuple(int(x) for x in step) for step in data.get("steps", ())),  # type: ignore[misc]
        )


def round_argv(
    caps: binaries.Capabilities, target: Path | str, draft: Path | str, gen: binaries.GenParams, k: int = ROUND_K
) -> list[str]:
    """``llama-speculative-simple -m T -md D``: draft-simple at K = ``k`` and p-min 0, with the prediction's GPU
    layers for both (``-ngl`` and the build's draft option, as a benchmark passes them)."""
    setting = Setting("draft-simple", k, 0.0)
    # a checkpointed target's rounds are read from the debug log: its printed totals count replayed tokens
    round_log = checkpointed(str(target), "target")
    return binaries.method_argv(caps, target, draft, ROUND_PROMPT, gen, setting, round_log=round_log)


class Rounds(NamedTuple):
    run: RoundRun  # the median run
    extra: float  # seconds per decode call beyond the modelled parts
    conditions: Conditions | None  # None: kept before conditions were recorded


def measure_rounds(
    target: Path | str,
    draft: Path | str,
    gen: binaries.GenParams,
    residual: Callable[[RoundRun], float],
    *,
    should_cancel: Callable[[], bool] | None = None,
    timeout_s: float,
    again: bool = False,
    k: int = ROUND_K,
) -> Rounds:
    """The median of ROUND_REPEATS timed runs of the pair, kept per target and draft file, build, options and machine
    like a cost model (a kept one is returned without running), and ``residual`` of it (seconds per decode call
    beyond the modelled parts, which the hardware page shows per round), taken with the cost models of the moment it
    was measured and kept with it. A kept run's residual is the kept one, never the kept seconds set against a cost
    model measured at another moment (on a shared machine that difference alone can outweigh the residual). Measured
    again where the kept one was disturbed and the machine is quiet now, or ``again`` (a cost model it was taken
    with was measured anew); runs taken while other work held the CPU, or lying far apart, are taken again
    (runner.predict.conditions) and kept marked where they stay so. Raises ReplayError (one line) when llama.cpp
    fails."""
    gen = replace(gen, temperature=0.0, n_predict=ROUND_TOKENS, ctx_size=max(gen.ctx_size or 0, 1024))
    caps = binaries.capabilities(binaries.find_binary(binaries.SPECULATIVE))
    # the key holds the files' contents (runner.predict.kept), not where they lie
    paths = {str(target), str(draft)}
    argv = round_argv(caps, target, draft, gen, k)[1:]
    options = [("-" if a in paths else a) for a in argv]
    options += [f"draft:{kept.file_sha256(draft)}", f"rounds:{ROUND_REPEATS}"]
    found = kept.find(kept.COSTS, target, options)
    if found is not None and not again:
        try:
            kept_rounds = Rounds(
                RoundRun.from_dict(found["round"]),
                float(found["extra_per_call_s"]),
                Conditions.from_dict(found.get("conditions")),
            )
        except (KeyError, TypeError, ValueError):
            pass  # damaged, or kept before the residual was: measured again
        else:
            if not _disturbed(kept_rounds.conditions, found) or not conditions.quiet_now():
                return kept_rounds

    def once() -> tuple[list[RoundRun], float | None]:
        runs = [_run_once(caps, target, draft, gen, should_cancel, timeout_s, k) for _ in range(ROUND_REPEATS)]
        return runs, spread_of([r.decode_s for r in runs])

    runs, cond = quietly(once)
    run = sorted(runs, key=lambda r: r.decode_s)[len(runs) // 2]
    spent = sum(r.decode_s for r in runs)
    extra = residual(run)
    data = {
        "round": run.to_dict(),
        "decode_s_all": [r.decode_s for r in runs],
        "extra_per_call_s": extra,
        "calls_per_round": k + 2,  # a full round: the target's batch, K draft decodes, the draft's intake
        "draft": Path(draft).name[:255],
        "conditions": cond.to_dict(),
    }
    kept.keep(kept.COSTS, target, options, data, seconds=spent, threads=gen.threads, depth=run.n_encoded)
    return Rounds(run, extra, cond)


def _disturbed(c: Conditions | None, found: dict[str, Any]) -> bool:
    """A kept record's conditions; one kept before conditions were says only how far its runs lay apart."""
    if c is not None:
        return c.disturbed
    spread = spread_of([float(x) for x in found.get("decode_s_all") or []])
    return spread is not None and spread > MAX_SPREAD


def _run_once(
    caps: binaries.Capabilities,
    target: Path | str,
    draft: Path | str,
    gen: binaries.GenParams,
    should_cancel: Callable[[], bool] | None,
    timeout_s: float,
    k: int = ROUND_K,
) -> RoundRun:
    res = procs.run_process(
        round_argv(caps, target, draft, gen, k),
        timeout_s=timeout_s,
        should_cancel=should_cancel,
        env=procs.benchmark_env(),
    )
    if res.cancelled:
        raise ReplayCancelled("cancelled")
    if res.timed_out:
        raise ReplayError(f"timing the pair's rounds exceeded the {timeout_s:g} s limit and was stopped")
    fig = output.parse_speculative(res.rc, res.stdout, res.stderr, ROUND_PROMPT)
    if isinstance(fig, output.RunFailure):
        raise ReplayError(f"timing the pair's rounds failed: {fig.message}")
    if fig.n_decoded - fig.n_accept <= 0:
        raise ReplayError("timing the pair's rounds: llama-speculative-simple reported no round")
    return RoundRun(k, fig.decode_s, fig.n_decoded, fig.n_drafted, fig.n_accept, fig.n_encoded, fig.rounds)


@dataclass(frozen=True)
class Fit:
    """How a round's residual grows with what it drafts: ``per_round`` seconds every round pays, plus ``per_token``
    seconds per drafted token, fitted to the residual of full rounds at two K (ROUND_K and FIT_K). Per round, per
    decode call and per drafted token are its special cases (per_token 0; per_round twice per_token, as a round of d
    tokens makes d + 2 calls; per_round 0); which one the machine and pair follow is measured, not assumed."""

    per_round: float
    per_token: float

    def at(self, drafted: int) -> float:
        return self.per_round + self.per_token * drafted

    def describe(self) -> str:
        return f"{self.per_round * 1000:+.2f} ms per round {self.per_token * 1000:+.2f} ms per drafted token"


def fit(points: list[tuple[int, float]]) -> Fit | None:
    """The line through (K, seconds beyond the parts per full round) at two or more K, neither part below zero (a
    part that would be is left out and the other fitted alone: the parts' noise is no saving). None with one K."""
    ks = {k for k, _ in points}
    if len(ks) < 2:
        return None
    n = len(points)
    mk, mr = sum(k for k, _ in points) / n, sum(r for _, r in points) / n
    var = sum((k - mk) ** 2 for k, _ in points)
    slope = sum((k - mk) * (r - mr) for k, r in points) / var
    base = mr - slope * mk
    if slope < 0:
        return Fit(max(0.0, mr), 0.0)
    if base < 0:
        return Fit(0.0, max(0.0, sum(k * r for k, r in points) / sum(k * k for k, _ in points)))
    return Fit(base, slope)
