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


# How a round's residual may grow with K (a full round of K drafted tokens makes K + 2 decode calls): the part every
# round pays, per drafted token, or per call (the target's batch, the draft's intake and one per drafted token).
SHAPES = ("per round", "per call", "per drafted token")


@dataclass(frozen=True)
class Fit:
    """How a round's residual grows with what it drafts: ``per_round`` seconds every round pays, plus ``per_token``
    seconds per drafted token. ``fit`` chooses one of SHAPES, so one of the two is zero or (per call) the part per
    round is twice the part per token."""

    per_round: float
    per_token: float

    def price(self, rounds: float, drafted: float, calls: float) -> float:
        """Seconds over ``rounds`` rounds that drafted ``drafted`` tokens in ``calls`` decode calls: per call, the
        calls themselves (a round p-min stopped makes one more than its drafted tokens and two), else per round and
        per drafted token."""
        if self.shape == "per call":
            return self.per_token * calls
        return self.per_round * rounds + self.per_token * drafted

    @property
    def shape(self) -> str:
        if self.per_token == 0:
            return "per round"
        if self.per_round == 0:
            return "per drafted token"
        return "per call" if abs(self.per_round - 2 * self.per_token) <= 1e-12 else "per round and token"

    def describe(self) -> str:
        if self.shape == "per call":
            return f"{self.per_token * 1000:+.2f} ms per decode call"
        if self.shape == "per round and token":
            return f"{self.per_round * 1000:+.2f} ms per round {self.per_token * 1000:+.2f} ms per drafted token"
        return f"{(self.per_round or self.per_token) * 1000:+.2f} ms {self.shape}"


def fit(points: list[tuple[int, float]]) -> Fit | None:
    """Of SHAPES, the one that fits (K, seconds beyond the parts per full round) at two or more K best, its one part
    by least squares; None with one K.

    One part, not the line through both points: two timed K hold each other's noise, and a line through two noisy
    points extrapolates it (a residual whose sign flips between K 4 and 8 gave a steep line far off at K 8). Which
    shape the rounds follow is what the two K decide. Signed as measured: a negative part says that the parts, each
    timed alone, overstate a real round on this machine (seen on small CPUs); a disturbed measurement is kept out by
    its conditions (runner.predict.conditions), and prediction.step_seconds never lets a round fall below
    MIN_PARTS_SHARE of its parts. (figures: docs/benchmarks.md, "Figures behind design choices")"""
    if len({k for k, _ in points}) < 2:
        return None
    fits = []
    for shape in SHAPES:
        x = [_units(shape, k) for k, _ in points]
        c = sum(xi * r for xi, (_, r) in zip(x, points, strict=True)) / sum(xi * xi for xi in x)
        error = sum((c * xi - r) ** 2 for xi, (_, r) in zip(x, points, strict=True))
        line = Fit(c, 0.0) if shape == "per round" else Fit(2 * c, c) if shape == "per call" else Fit(0.0, c)
        fits.append((round(error, 15), SHAPES.index(shape), line))  # equal errors: SHAPES' order
    return min(fits, key=lambda f: f[:2])[2]


def _units(shape: str, k: int) -> float:
    """What a full round of K pays the part of ``shape`` for: once, K + 2 calls, K tokens."""
    return 1.0 if shape == "per round" else float(k + 2) if shape == "per call" else float(k)
