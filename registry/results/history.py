"""A pair's measured figures across llama.cpp builds: where a newer build is faster or slower.

Results are kept per build (a new run never replaces an older one's rows), so the same cell —
pair, method, content type, hardware class, K and temperature — can be compared build to build.
A change is shown only when the two builds' tokens/s ranges (min–max over repeats) do not overlap:
a difference inside the spread is noise on the machine, not the build.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from registry.models import BenchmarkResult

# build_number lives beside the figures (the Predicted column orders prediction runs by build too); imported
# here, where it is also read (tests and callers name it from this module).
from registry.results.figures import build_number, usable_measured


def method_of(r: BenchmarkResult) -> str:
    # Results stored before a method was recorded were all draft-model runs (llama-speculative-simple).
    return getattr(r, "method", "") or "draft-simple"


def hardware_class_of(r: BenchmarkResult) -> str:
    """The class figures are compared within: the machine's class and the build's instruction set
    (``cpu-2c/avx2``), so an AVX-512 build is never compared with an AVX2 build as the same hardware."""
    if r.run.hardware_class:
        isa = (r.run.hardware or {}).get("llama_isa") if isinstance(r.run.hardware, dict) else None
        return f"{r.run.hardware_class}/{isa}" if isa else r.run.hardware_class
    m = re.search(r"\(([^()]*)\)\s*$", r.hardware or "")  # the runner's label ends with "(class)"
    return m.group(1) if m else (r.hardware or "")


@dataclass
class BuildChange:
    """One cell measured under an older and a newer build whose tokens/s ranges do not overlap."""

    method: str
    content_type: str
    hardware_class: str
    k: int
    temperature: float
    old_build: str
    new_build: str
    old_tokens_per_second: float
    new_tokens_per_second: float
    old_range: tuple[float, float]
    new_range: tuple[float, float]
    old_speedup: float | None
    new_speedup: float | None

    @property
    def direction(self) -> str:
        return "faster" if self.new_tokens_per_second > self.old_tokens_per_second else "slower"

    @property
    def percent(self) -> float:
        """How much faster (positive) or slower (negative), in percent of the older build's median."""
        return 100 * (self.new_tokens_per_second / self.old_tokens_per_second - 1)

    @property
    def sentence(self) -> str:
        speed = (
            f"; speed-up {self.old_speedup:.2f}× → {self.new_speedup:.2f}×"
            if self.old_speedup is not None and self.new_speedup is not None
            else ""
        )
        return (
            f"{self.new_build} is {abs(self.percent):.0f}% {self.direction} than {self.old_build} "
            f"({self.content_type or 'any content'}, {self.method}, {self.hardware_class or 'unknown hardware'}, "
            f"K={self.k}, temperature {self.temperature:g}): {self.old_tokens_per_second:.1f} → "
            f"{self.new_tokens_per_second:.1f} tokens/s, ranges {self.old_range[0]:.1f}–{self.old_range[1]:.1f} "
            f"and {self.new_range[0]:.1f}–{self.new_range[1]:.1f}{speed}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "direction": self.direction, "percent": self.percent}


def _range(r: BenchmarkResult, tps: float) -> tuple[float, float]:
    # A result without its spread (e.g. imported from a file that lacked it) counts as a point (``tps``).
    lo = r.tps_min if r.tps_min is not None else tps
    hi = r.tps_max if r.tps_max is not None else tps
    return (lo, hi)


def _order(r: BenchmarkResult) -> tuple:
    # Builds are ordered by number; a label without one (a local build) by when it was measured.
    n = build_number(r.llama_cpp_build)
    return (n is None, n or 0, r.run.created_at)


def build_changes(pair_id: int) -> list[BuildChange]:
    """Every cell of the pair where a build differs from the previous build measured, beyond both spreads."""
    rows = (
        usable_measured()
        .filter(pair_id=pair_id, tokens_per_second__isnull=False)
        .exclude(llama_cpp_build="")
        .select_related("run")
    )
    cells: dict[tuple, dict[str, BenchmarkResult]] = {}
    for r in rows:
        key = (method_of(r), r.content_type, hardware_class_of(r), r.k, r.temperature)
        by_build = cells.setdefault(key, {})
        seen = by_build.get(r.llama_cpp_build)
        # Several runs of one build: the latest stands for it (the machine may have changed since).
        if seen is None or r.run.created_at > seen.run.created_at:
            by_build[r.llama_cpp_build] = r
    out = []
    for (method, content_type, hw, k, temperature), by_build in cells.items():
        ordered = sorted(by_build.values(), key=_order)
        for old, new in pairwise(ordered):
            old_tps, new_tps = old.tokens_per_second, new.tokens_per_second
            if old_tps is None or new_tps is None:  # never: the query leaves them out
                continue
            (olo, ohi), (nlo, nhi) = _range(old, old_tps), _range(new, new_tps)
            if nlo > ohi or nhi < olo:
                out.append(
                    BuildChange(
                        method,
                        content_type,
                        hw,
                        k,
                        temperature,
                        old.llama_cpp_build,
                        new.llama_cpp_build,
                        old_tps,
                        new_tps,
                        (olo, ohi),
                        (nlo, nhi),
                        old.speedup,
                        new.speedup,
                    )
                )
    return sorted(out, key=lambda c: (c.content_type, c.method, c.hardware_class, c.k, c.temperature, c.new_build))
