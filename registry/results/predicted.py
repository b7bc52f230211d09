"""Predicted figures beside measured ones: which measurement answers which prediction, and how far apart they are.

A prediction (runner.predict.prediction) is made at temperature 0 for one setting and content type; the measurement that
answers it is the newest usable cell of the same setting, content type and temperature 0. A cell whose
speculative text parted from the plain one timed two different texts, so it is shown but kept out of the
error statistics (and near-ties in the transcript say where such parting can happen).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean

from registry.results.figures import Figure


@dataclass(frozen=True)
class Comparison:
    content_type: str
    setting: str
    predicted: Figure
    measured: Figure | None
    texts_parted: bool  # the measured cell's speculative text differs from the plain one

    @property
    def acceptance_error(self) -> float | None:
        """Predicted minus measured acceptance, in percentage points."""
        p, m = self.predicted.acceptance, self.measured.acceptance if self.measured else None
        return None if p is None or m is None else 100 * (p - m)

    @property
    def speedup_error(self) -> float | None:
        """Predicted against measured speedup, in per cent of the measured one."""
        p, m = self.predicted.speedup, self.measured.speedup if self.measured else None
        return None if p is None or not m else 100 * (p - m) / m

    @property
    def counts(self) -> bool:
        """Whether it enters the error statistics."""
        return self.measured is not None and not self.texts_parted


def _label(f: Figure) -> str:
    return f.obj.setting_label if f.obj is not None else f"{f.method} K={f.k}"


def compare(predicted: list[Figure], measured: list[Figure]) -> list[Comparison]:
    """Each prediction with the measurement of its setting (temperature 0, newest first), if any."""
    answers: dict[tuple[str, str], Figure] = {}
    for m in sorted(measured, key=lambda f: getattr(f.obj, "pk", 0)):  # the newest wins
        if m.obj is not None and getattr(m.obj, "temperature", 0) == 0:
            answers[(m.content_type, _label(m))] = m
    out = []
    for p in predicted:
        answer = answers.get((p.content_type, _label(p)))
        parted = answer is not None and getattr(answer.obj, "identical", None) is False
        out.append(Comparison(p.content_type, _label(p), p, answer, parted))
    return sorted(out, key=lambda c: (c.content_type, -(c.predicted.speedup or 0)))


@dataclass(frozen=True)
class ErrorSummary:
    n: int
    acceptance_mean: float | None  # mean absolute error, percentage points
    acceptance_worst: float | None
    speedup_mean: float | None  # mean absolute error, per cent
    speedup_worst: float | None


def error_summary(rows: list[Comparison]) -> ErrorSummary | None:
    counted = [r for r in rows if r.counts]
    if not counted:
        return None
    acc = [abs(e) for r in counted if (e := r.acceptance_error) is not None]
    spd = [abs(e) for r in counted if (e := r.speedup_error) is not None]
    return ErrorSummary(
        len(counted),
        mean(acc) if acc else None,
        max(acc) if acc else None,
        mean(spd) if spd else None,
        max(spd) if spd else None,
    )
