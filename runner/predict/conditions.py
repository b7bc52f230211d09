"""The conditions a cost measurement was taken under, and when a kept one may stand for the machine.

A cost model (batch and sampling timings) and a pair's round residual are measured once and kept (runner.predict.
kept); every later prediction on the machine reuses them. One taken while other work held the CPU would make every
later prediction too slow, so each records what the benchmark records of a cell: the share of the machine's CPU
other processes took meanwhile (runner.measure.cells.other_cpu_share), and how far its repeats lie apart. A
measurement past either bound is disturbed: measured again (``REMEASURE`` times), and kept marked where it stays
disturbed, so that a prediction made from it says so (``Conditions.disturbed`` in ``predict --json``'s cost models,
and on the hardware page). A kept quiet measurement is checked against the machine as it is now before reuse once
it is older than ``RECHECK_AFTER_S`` (runner.predict.prediction.measure_cost: one timed batch of one token).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from runner.measure.cells import BUSY_SHARE, cpu_seconds, other_cpu_share

# Repeats further apart than this, (third quartile − first) / median, are not one machine's steady figure.
MAX_SPREAD = 0.15
# A kept figure that a fresh check finds this far off (either way) no longer describes the machine.
DRIFT = 0.25
REMEASURE = 2  # times a disturbed measurement is taken again before it is kept marked (SPECREG_COST_REMEASURE)
RECHECK_AFTER_S = 3600.0  # a quiet record is trusted this long without a check (SPECREG_COST_RECHECK_AFTER_S)


def _env(name: str, default: float) -> float:
    """A setting from the environment, read when used (a test or an operator may set it after import)."""
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


T = TypeVar("T")


@dataclass(frozen=True)
class Conditions:
    """What was true while a cost measurement ran."""

    other_cpu_share: float | None  # None where the machine cannot say (not Linux)
    spread: float | None  # its repeats' spread; None where it had one repeat
    measured_at: float  # time.time() when it finished
    attempts: int = 1  # measurements taken: more than one where the first were disturbed

    @property
    def disturbed(self) -> bool:
        busy, spread = self.disturbance
        return busy > 0 or spread > MAX_SPREAD

    @property
    def disturbance(self) -> tuple[float, float]:
        """How disturbed, to compare attempts: other work's share beyond BUSY_SHARE first (other processes slow every
        figure), then its repeats' spread (0 for what the machine could not say)."""
        busy = max(0.0, (self.other_cpu_share or 0.0) - BUSY_SHARE)
        return busy, self.spread if self.spread is not None else 0.0

    def why(self) -> str:
        """Why it is disturbed, in words ("" where it is not)."""
        parts = []
        if self.other_cpu_share is not None and self.other_cpu_share > BUSY_SHARE:
            parts.append(f"other work took {self.other_cpu_share:.0%} of the CPU")
        if self.spread is not None and self.spread > MAX_SPREAD:
            parts.append(f"its repeats lay {self.spread:.0%} apart")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"disturbed": self.disturbed, "why": self.why()}

    @classmethod
    def from_dict(cls, data: Any) -> Conditions | None:
        """The conditions a kept record holds; None for a record kept before conditions were (or a damaged one)."""
        if not isinstance(data, dict):
            return None
        try:
            share, spread = data.get("other_cpu_share"), data.get("spread")
            return cls(
                None if share is None else float(share),
                None if spread is None else float(spread),
                float(data["measured_at"]),
                int(data.get("attempts", 1)),
            )
        except (KeyError, TypeError, ValueError):
            return None


def spread_of(values: Sequence[float]) -> float | None:
    """(third quartile − first) / median of repeated timings; None for fewer than three."""
    v = sorted(values)
    if len(v) < 3 or v[len(v) // 2] <= 0:
        return None
    return (v[(3 * len(v)) // 4] - v[len(v) // 4]) / v[len(v) // 2]


def watched(measure: Callable[[], T]) -> tuple[T, float | None]:
    """``measure``'s result and the share of the machine's CPU other processes took while it ran (None where the
    machine cannot say)."""
    before, started = cpu_seconds(), time.monotonic()
    value = measure()
    return value, other_cpu_share(before, cpu_seconds(), time.monotonic() - started)


def quietly(measure: Callable[[], tuple[T, float | None]], attempts: int | None = None) -> tuple[T, Conditions]:
    """Run ``measure`` (returning its result and its repeats' spread) until it is not disturbed, at most
    1 + ``attempts`` times. The first quiet result with its conditions; where every one was disturbed, the least
    disturbed (``Conditions.disturbance``), marked, with the number of attempts taken."""
    tries = 1 + max(0, int(_env("SPECREG_COST_REMEASURE", REMEASURE)) if attempts is None else attempts)
    taken: list[tuple[T, Conditions]] = []
    for n in range(1, tries + 1):
        (value, spread), share = watched(measure)
        c = Conditions(share, spread, time.time(), n)
        if not c.disturbed:
            return value, c
        taken.append((value, c))
    # Not simply the last: each attempt sampled its own moments of the machine, and the last is no likelier than
    # the others to be the quiet one.
    value, c = min(taken, key=lambda vc: vc[1].disturbance)
    return value, replace(c, attempts=tries)


def needs_check(c: Conditions | None, now: float | None = None) -> bool:
    """Whether a kept record must be compared with the machine before reuse: kept without conditions, or quiet but
    older than RECHECK_AFTER_S. (A disturbed one is measured again outright.)"""
    if c is None:
        return True
    return ((now or time.time()) - c.measured_at) > _env("SPECREG_COST_RECHECK_AFTER_S", RECHECK_AFTER_S)


def drifted(kept_s: float, now_s: float) -> bool:
    """Whether a fresh timing is DRIFT or more away from the kept one."""
    return kept_s <= 0 or abs(now_s / kept_s - 1.0) >= DRIFT


def quiet_now(window_s: float = 0.5) -> bool:
    """Whether other work leaves the CPU alone now (over ``window_s``): measuring again helps only then."""
    before, started = cpu_seconds(), time.monotonic()
    time.sleep(window_s)
    share = other_cpu_share(before, cpu_seconds(), time.monotonic() - started)
    return share is None or share <= BUSY_SHARE


def described(data: Any) -> str:
    """A kept record's conditions in a few words, for the hardware page (``Conditions.why`` says it whole)."""
    c = Conditions.from_dict(data)
    if c is None:
        return "not recorded"
    share = "?" if c.other_cpu_share is None else f"{c.other_cpu_share:.0%}"
    spread = "" if c.spread is None else f", spread {c.spread:.0%}"
    return f"{'disturbed' if c.disturbed else 'quiet'}: others {share}{spread}"
