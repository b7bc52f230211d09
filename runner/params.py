"""Benchmark parameters: defaults, and every value checked before a run is queued."""
from __future__ import annotations

from typing import Any

from .prompts import load_task_set, parse_task_set
from .sweep import DEFAULT_KS, GRID

DEFAULT_PARAMS: dict[str, Any] = {
    "ks": list(DEFAULT_KS), "content_types": None, "temperatures": [0.0], "repeats": 3, "n_predict": 128,
    "prompts_per_type": 3, "p_min": None, "extend": True, "threads": None, "task_set": None,
    "timeout_s": 900,  # per llama.cpp process; a hung or runaway process is killed with its children
}


class BenchmarkError(Exception):
    """A benchmark cannot be queued or run; one line."""


def normalize_params(params: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in and every value checked, so a bad request fails when queued, not hours later."""
    p = {**DEFAULT_PARAMS, **{k: v for k, v in params.items() if v is not None}}
    unknown = set(p) - set(DEFAULT_PARAMS)
    if unknown:
        raise BenchmarkError(f"unknown benchmark parameter(s): {', '.join(sorted(unknown))}")
    ks = sorted({int(k) for k in p["ks"]})
    if not ks or any(k < 1 or k > 64 for k in ks):
        raise BenchmarkError(f"K must be between 1 and 64 (grid: {', '.join(map(str, GRID))}); got {p['ks']}")
    temps = [float(t) for t in p["temperatures"]]
    if not temps or any(t < 0 or t > 2 for t in temps):
        raise BenchmarkError(f"temperatures must lie in [0, 2]; got {p['temperatures']}")
    for name, lo, hi in (("repeats", 1, 20), ("n_predict", 8, 4096), ("prompts_per_type", 1, 50),
                         ("timeout_s", 1, 6 * 3600)):
        if not lo <= int(p[name]) <= hi:
            raise BenchmarkError(f"{name} must be between {lo} and {hi}; got {p[name]}")
    task_set = parse_task_set(p["task_set"], "task set") if p["task_set"] else load_task_set()
    types = p["content_types"] or None
    if types:
        missing = [t for t in types if t not in task_set.content_types]
        if missing:
            raise BenchmarkError(f"content type(s) {', '.join(missing)} not in the task set "
                                 f"(have: {', '.join(task_set.content_types)})")
    return {**p, "ks": ks, "temperatures": temps, "repeats": int(p["repeats"]), "n_predict": int(p["n_predict"]),
            "prompts_per_type": int(p["prompts_per_type"]), "content_types": types, "timeout_s": float(p["timeout_s"])}
