"""Numbers people read: parameters, bytes, percentages, speedups (the template filters of
registry_format, and the table's pre-formatted rows, use these)."""

from __future__ import annotations


def params(n: int | None) -> str:
    if not n:
        return "–"
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


def nbytes(n: int | None) -> str:
    if n is None:
        return "–"
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def duration(seconds: float) -> str:
    """A span of time as people say it: "40 s", "12 min", "2.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _number(v: object) -> float | None:
    # A missing attribute renders as "" in templates: treat it as no value, not as an error.
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def pct(v: float | None) -> str:
    n = _number(v)
    return "–" if n is None else f"{n * 100:.1f}%"


def times(v: float | None) -> str:
    n = _number(v)
    return "–" if n is None else f"{n:.2f}×"


def ratio(v: float | None) -> str:
    n = _number(v)
    return "–" if n is None else f"{n:.1f}×"
