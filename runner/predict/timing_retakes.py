"""A cost model's timing taken again only at the batch sizes that were disturbed.

A verify batch of K drafted tokens is K + 1 tokens: a draft pair's predictions time batches up to 9, the n-gram
methods' (K up to 16) up to 17, and a take of every size costs a time that grows with their sum (over a minute for
a 1.5B target on a small CPU). A take whose repeats spread is taken again (runner.predict.conditions.quietly); in an
uneven hour every take spreads somewhere, and taking every size again each time cost more than the benchmark the
prediction spares. So a retake times only the sizes whose repeats spread or that ran while other work held the CPU,
and each size keeps its steadiest take. Every size is timed, none read off a line: a CPU's cost is not straight in
the batch (on AVX-512 a batch of a multiple of 4 tokens is cheaper than the one before it; docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runner.predict import conditions


def _key(busy: float | None, spread: float) -> tuple[float, float]:
    """How disturbed one size's take is, as conditions.Conditions.disturbance orders attempts."""
    return max(0.0, (busy or 0.0) - conditions.BUSY_SHARE), spread


def _steady(key: tuple[float, float]) -> bool:
    return key[0] <= 0 and key[1] <= conditions.MAX_SPREAD


def retaking(
    timed: Callable[[list[int]], dict[str, Any]], sizes: Sequence[int]
) -> Callable[[], tuple[dict[str, Any], float | None]]:
    """A measurement for conditions.quietly whose every call times (``timed(sizes)``: the timing mode's JSON) the
    sizes not yet steady, all of them the first time, and returns the takes merged (each size its steadiest, the
    sampling from the latest) with the largest spread among them."""
    best: dict[int, tuple[tuple[float, float], float, float, float]] = {}  # size: key, seconds, seconds_last, spread
    lo: list[tuple[tuple[float, float], float, float]] = []  # the batch of one behind the shallower context

    def once() -> tuple[dict[str, Any], float | None]:
        todo = [b for b in sizes if b not in best or not _steady(best[b][0])]
        data, busy = conditions.watched(lambda: timed(todo or [1]))
        spreads = data.get("spread") or [0.0] * len(data["batch"])
        for b, s, s_last, sp in zip(data["batch"], data["seconds"], data["seconds_last"], spreads, strict=True):
            key = _key(busy, float(sp))
            if int(b) not in best or key < best[int(b)][0]:
                best[int(b)] = (key, float(s), float(s_last), float(sp))
        if data.get("seconds_lo") is not None:
            key = _key(busy, float(data.get("spread_lo", 0.0)))
            if not lo or key < lo[0][0]:
                lo[:] = [(key, float(data["seconds_lo"]), float(data.get("spread_lo", 0.0)))]
        merged = dict(data)
        order = sorted(best)
        merged["batch"] = order
        merged["seconds"] = [best[b][1] for b in order]
        merged["seconds_last"] = [best[b][2] for b in order]
        merged["spread"] = [best[b][3] for b in order]
        if lo:
            merged["seconds_lo"], merged["spread_lo"] = lo[0][1], lo[0][2]
        worst = [*merged["spread"], *([lo[0][2]] if lo else [])]
        return merged, max(worst) if worst else None

    return once
