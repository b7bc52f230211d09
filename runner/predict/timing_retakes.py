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


def retaking(
    timed: Callable[[list[int]], dict[str, Any]], sizes: Sequence[int]
) -> Callable[[], tuple[dict[str, Any], float | None]]:
    """A measurement for conditions.quietly whose every call times (``timed(sizes)``: the timing mode's JSON) the
    sizes not yet steady, all of them the first time, and returns the takes merged (each size its steadiest, the
    sampling from the latest) with the largest spread among them."""
    # per size: the conditions of its steadiest take (conditions.Conditions orders and judges them), its seconds
    # with every token's logits and with the last token's
    best: dict[int, tuple[conditions.Conditions, float, float]] = {}
    lo: list[tuple[conditions.Conditions, float]] = []  # the batch of one behind the shallower context

    def once() -> tuple[dict[str, Any], float | None]:
        todo = [b for b in sizes if b not in best or best[b][0].disturbed]
        data, busy = conditions.watched(lambda: timed(todo or [1]))
        spreads = data.get("spread") or [0.0] * len(data["batch"])
        for b, s, s_last, sp in zip(data["batch"], data["seconds"], data["seconds_last"], spreads, strict=True):
            c = conditions.Conditions(busy, float(sp), 0.0)
            if int(b) not in best or c.disturbance < best[int(b)][0].disturbance:
                best[int(b)] = (c, float(s), float(s_last))
        if data.get("seconds_lo") is not None:
            c = conditions.Conditions(busy, float(data.get("spread_lo", 0.0)), 0.0)
            if not lo or c.disturbance < lo[0][0].disturbance:
                lo[:] = [(c, float(data["seconds_lo"]))]
        order = sorted(best)
        merged = dict(data)
        merged["batch"] = order
        merged["seconds"] = [best[b][1] for b in order]
        merged["seconds_last"] = [best[b][2] for b in order]
        merged["spread"] = [best[b][0].spread or 0.0 for b in order]
        if lo:
            merged["seconds_lo"], merged["spread_lo"] = lo[0][1], lo[0][0].spread or 0.0
        worst = [*merged["spread"], *([merged["spread_lo"]] if lo else [])]
        return merged, max(worst) if worst else None

    return once
