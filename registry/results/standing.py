"""Whether a measured speed-up may be headlined, and if not, what it is: one rule for the runner's recommendation, the
table, the pair page, the API and the deploy command.

A speed-up is a ratio of two noisy speeds. It stands as a headline only when the measurement can tell it from noise:
at least ``MIN_PAIRS`` interleaved pairs (a speculative run beside the plain run it is compared with), none of which
crosses 1, on a machine other work left alone. Anything else is still shown, as what it is.
"""

from __future__ import annotations

from typing import Any

MIN_PAIRS = 2  # one interleaved pair cannot tell a gain from noise
BUSY_SHARE = 0.10  # other work above this share of the CPU makes a cell's speeds suspect

ONE_REPEAT, CONTENDED, NO_GAIN = "1 repeat", "contended", "no measurable gain"


def standing(
    speedup: float | None,
    low: float | None = None,
    high: float | None = None,
    pairs: int | None = None,
    other_cpu_share: float | None = None,
) -> str:
    """ "" when a measured speed-up may be headlined, else the short reason it may not: "1 repeat", "contended" or
    "no measurable gain" (its interleaved pairs reach 1). Figures measured before the pairs' range was kept (``pairs``
    None) count as they are, as reported ones do."""
    if speedup is None:
        return ""
    if pairs is not None and pairs < MIN_PAIRS:
        return ONE_REPEAT if pairs == 1 else f"{pairs} repeats"
    if other_cpu_share is not None and other_cpu_share > BUSY_SHARE:
        return CONTENDED
    if low is not None and high is not None and low <= 1.0 <= high:
        return NO_GAIN
    return ""


def standing_of(kind: str, result: Any) -> str:
    """``standing`` of a stored result (a BenchmarkResult); "" for reported and predicted figures, whose kind already
    says how far to trust them."""
    if kind != "measured" or result is None:
        return ""
    return standing(
        getattr(result, "speedup", None),
        getattr(result, "speedup_min", None),
        getattr(result, "speedup_max", None),
        getattr(result, "pairs", None),
        getattr(result, "other_cpu_share", None),
    )


def described(reason: str, speedup: float | None) -> str:
    """A figure that is not headlined, in words: "no measurable gain: 2.13× in 1 repeat"."""
    if not reason or speedup is None:
        return reason
    if reason == CONTENDED:
        return f"contended: {speedup:.2f}× while other work took the CPU"
    if reason == NO_GAIN:
        return f"no measurable gain: {speedup:.2f}× within its spread"
    return f"no measurable gain: {speedup:.2f}× in {reason}"
