"""Real speculative rounds of a pair, timed by llama.cpp: what the cost model's parts leave out.

The cost model (runner.predict.prediction) times decodes and sampling, each alone. A real round pays more: the loop's
bookkeeping (cache trims, batch building, the sampler's state), the two models slowing each other as they alternate,
and on a GPU each step's launches and synchronisations, which users have seen reach ~20 ms per round (llama.cpp
#25908). This module runs ``llama-speculative-simple`` with the pair itself (draft-simple, K = ROUND_K, p-min 0) and
keeps what it printed: the decode loop's seconds, its rounds (n_decoded − n_accept: each round yields its accepted
tokens and one of the target's) and its drafted tokens. runner.predict.prediction subtracts the modelled parts and
keeps the rest per llama.cpp decode call, ``CostModel.extra_per_call_s`` (shown per round of K tokens).

Why p-min 0: the draft then proposes K tokens every round whatever the target accepts (only the generation budget's
last rounds draft fewer), so each round's modelled part is known without a transcript. Why the pair's own draft and
not one standard run: measured on 2 cores (2026-11-27), the target drafting for itself left +18.8 ms per round
beyond its parts, but added to the rounds of its 0.5 B draft it doubled the prediction's error (5.1% to 11.8%): what
a round leaves out depends on the draft. Kept like a cost model (runner.predict.kept): per target file, draft file
(its sha256 in the options), build, options and machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from inspector.spec_flags import Setting
from runner.llama import binaries, output, procs
from runner.predict import kept
from runner.predict.tool import ReplayCancelled, ReplayError
from runner.state import checkpointed

ROUND_K = 4  # a short draft: most rounds of a real pair, and cheap to time
ROUND_TOKENS = 48  # about ten rounds per run
ROUND_REPEATS = 3  # the median run: one slow moment of a shared machine does not decide the figure
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
    caps: binaries.Capabilities, target: Path | str, draft: Path | str, gen: binaries.GenParams
) -> list[str]:
    """``llama-speculative-simple -m T -md D``: draft-simple at K = ROUND_K and p-min 0, with the prediction's GPU
    layers for both (``-ngl`` and the build's draft option, as a benchmark passes them)."""
    setting = Setting("draft-simple", ROUND_K, 0.0)
    # a checkpointed target's rounds are read from the debug log: its printed totals count replayed tokens
    round_log = checkpointed(str(target), "target")
    return binaries.method_argv(caps, target, draft, ROUND_PROMPT, gen, setting, round_log=round_log)


def measure_rounds(
    target: Path | str,
    draft: Path | str,
    gen: binaries.GenParams,
    residual: Callable[[RoundRun], float],
    *,
    should_cancel: Callable[[], bool] | None = None,
    timeout_s: float,
) -> tuple[RoundRun, float]:
    """The median of ROUND_REPEATS timed runs of the pair, kept per target and draft file, build, options and machine
    like a cost model (a kept one is returned without running), and ``residual`` of it (seconds per decode call
    beyond the modelled parts, which the hardware page shows per round), taken with the cost models of the moment it
    was measured and kept with it. A kept run's residual is the kept one, never the kept seconds set against a cost
    model measured at another moment: on a shared VM that difference alone read -67 ms per round where +7 ms had
    been measured. Raises ReplayError (one line) when llama.cpp fails."""
    gen = replace(gen, temperature=0.0, n_predict=ROUND_TOKENS, ctx_size=max(gen.ctx_size or 0, 1024))
    caps = binaries.capabilities(binaries.find_binary(binaries.SPECULATIVE))
    # the key holds the files' contents (runner.predict.kept), not where they lie
    paths = {str(target), str(draft)}
    argv = round_argv(caps, target, draft, gen)[1:]
    options = [("-" if a in paths else a) for a in argv]
    options += [f"draft:{kept.file_sha256(draft)}", f"rounds:{ROUND_REPEATS}"]
    found = kept.find(kept.COSTS, target, options)
    if found is not None:
        try:
            return RoundRun.from_dict(found["round"]), float(found["extra_per_call_s"])
        except (KeyError, TypeError, ValueError):
            pass  # damaged, or kept before the residual was: measured again
    runs = [_run_once(caps, target, draft, gen, should_cancel, timeout_s) for _ in range(ROUND_REPEATS)]
    run = sorted(runs, key=lambda r: r.decode_s)[len(runs) // 2]
    spent = sum(r.decode_s for r in runs)
    extra = residual(run)
    data = {
        "round": run.to_dict(),
        "decode_s_all": [r.decode_s for r in runs],
        "extra_per_call_s": extra,
        "calls_per_round": ROUND_K + 2,  # a full round: the target's batch, K draft decodes, the draft's intake
        "draft": Path(draft).name[:255],
    }
    kept.keep(kept.COSTS, target, options, data, seconds=spent, threads=gen.threads, depth=run.n_encoded)
    return run, extra


def _run_once(
    caps: binaries.Capabilities,
    target: Path | str,
    draft: Path | str,
    gen: binaries.GenParams,
    should_cancel: Callable[[], bool] | None,
    timeout_s: float,
) -> RoundRun:
    res = procs.run_process(
        round_argv(caps, target, draft, gen),
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
    return RoundRun(ROUND_K, fig.decode_s, fig.n_decoded, fig.n_drafted, fig.n_accept, fig.n_encoded, fig.rounds)
