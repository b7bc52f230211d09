"""Benchmark parameters: defaults, and every value checked before a run is queued."""

from __future__ import annotations

import math
import re
from typing import Any

from django.conf import settings

from inspector.spec_flags import MAX_K
from runner.errors import BenchmarkError
from runner.methods import DEFAULT_KS, GRID, P_MIN_GRID, MethodError, check_methods, settings_for
from runner.prompts import TaskSet, load_task_set, parse_task_set

DEFAULT_PARAMS: dict[str, Any] = {
    "ks": list(DEFAULT_KS),
    "content_types": None,
    "temperatures": [0.0],
    "repeats": 3,
    "n_predict": 128,
    "prompts_per_type": 3,
    "p_min": None,
    "extend": True,
    "threads": None,
    "task_set": None,
    "timeout_s": 900,  # per llama.cpp process; a hung or runaway process is killed with its children
    "methods": None,  # None: the draft's own method (draft-simple); run_benchmark without DRAFT: the n-gram family
    "p_mins": list(P_MIN_GRID),  # draft models and MTP heads: each K at each (p_min, when given, wins)
    "target_alone": False,  # no draft file: draftless methods of the target (run_benchmark TARGET)
    "via": "cli",  # "cli": llama-completion vs llama-speculative-simple; "server": through llama-server
    # "benchmark": predict every setting, then measure the best (runner.predict.runs); "predict": predict only
    "mode": "benchmark",
    "full_sweep": False,  # measure every setting, as before predictions existed (run_benchmark --full-sweep)
    "clients": [1],  # concurrent clients (via server only): runner.measure.load
    "parallel": None,  # the servers' slots (-np); None: as many as clients
    # manage.py soak (runner.soak.loop): how long, how often a record, the setting and, where named, the deployment
    "soak": None,
}
VIAS = ("cli", "server")
MODES = ("benchmark", "predict", "soak")


# What local_hardware_class() produces (cpu-2c, gpu-nvidia-h100x2): a queue-name part, never a path.
HARDWARE_CLASS = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def check_hardware_class(name: str) -> str:
    if not HARDWARE_CLASS.fullmatch(name):
        raise BenchmarkError(
            f"hardware class {name!r} is not valid: lower-case letters, digits, '.', '_' and '-', "
            "like cpu-2c or gpu-nvidia-h100"
        )
    return name


def process_count(p: dict[str, Any], n_types: int) -> int:
    """How many llama.cpp processes a run may start: a plain and a speculative run per cell and repeat."""
    ks = set(p["ks"])
    if p["extend"]:
        ks |= {g for g in GRID if g > max(ks)}  # the sweep may extend upward through the grid
    p_mins = [p["p_min"]] if p.get("p_min") is not None else p["p_mins"]
    settings = sum(len(settings_for(m, sorted(ks), p_mins)) for m in p["methods"])
    return n_types * len(p["temperatures"]) * settings * p["prompts_per_type"] * p["repeats"] * 2


def normalize_params(params: dict[str, Any], *, has_draft: bool = True) -> dict[str, Any]:
    """Defaults filled in and every value checked, so a bad request fails when queued, not hours later.

    ``has_draft``: whether the run has a draft file (methods that need one are refused without)."""
    p = {**DEFAULT_PARAMS, **{k: v for k, v in params.items() if v is not None}}
    has_draft = has_draft and not p["target_alone"]
    unknown = set(p) - set(DEFAULT_PARAMS)
    if unknown:
        raise BenchmarkError(f"unknown benchmark parameter(s): {', '.join(sorted(unknown))}")
    ks = _checked_ks(p["ks"])
    temps = _checked_temperatures(p["temperatures"])
    _check_counts(p)
    try:
        methods = check_methods(list(p["methods"] or ["draft-simple"]), has_draft=has_draft)
    except MethodError as exc:
        raise BenchmarkError(str(exc)) from None
    p_mins = _checked_p_mins(p["p_mins"], p["p_min"])
    _check_choice("mode", p["mode"], MODES)
    _check_choice("via", p["via"], VIAS)
    clients, parallel = _checked_concurrency(p["clients"], p["parallel"], p["via"])
    task_set = parse_task_set(p["task_set"], "task set") if p["task_set"] else load_task_set()
    types = _checked_content_types(p["content_types"] or None, task_set)
    out = {
        **p,
        "ks": ks,
        "temperatures": temps,
        "repeats": int(p["repeats"]),
        "n_predict": int(p["n_predict"]),
        "prompts_per_type": int(p["prompts_per_type"]),
        "content_types": types,
        "timeout_s": float(p["timeout_s"]),
        "extend": bool(p["extend"]),
        "methods": methods,
        "p_mins": p_mins,
        "p_min": float(p["p_min"]) if p["p_min"] is not None else None,
        "target_alone": not has_draft,
        "full_sweep": bool(p["full_sweep"]),
        "clients": clients,
        "parallel": parallel,
    }
    if out["mode"] == "predict":
        return out  # no benchmark process runs; the prediction's own work is bounded by K <= 64 and the prompts
    if out["mode"] == "soak":
        return out  # one server for the soak's duration (runner.soak.loop checks its own parameters)
    _check_process_count(out, len(types or task_set.content_types))
    return out


def _checked_ks(values: list[Any]) -> list[int]:
    ks = sorted({int(k) for k in values})
    if not ks or any(k < 1 or k > MAX_K for k in ks):
        raise BenchmarkError(f"K must be between 1 and {MAX_K} (grid: {', '.join(map(str, GRID))}); got {values}")
    return ks


def _checked_temperatures(values: list[Any]) -> list[float]:
    temps = [float(t) for t in values]
    if not temps or any(not math.isfinite(t) or t < 0 or t > 2 for t in temps):  # NaN passes any comparison
        raise BenchmarkError(f"temperatures must lie in [0, 2]; got {values}")
    return temps


def _check_counts(p: dict[str, Any]) -> None:
    for name, lo, hi in (
        ("repeats", 1, 20),
        ("n_predict", 8, 4096),
        ("prompts_per_type", 1, 50),
        ("timeout_s", 1, 6 * 3600),
    ):
        if not lo <= int(p[name]) <= hi:
            raise BenchmarkError(f"{name} must be between {lo} and {hi}; got {p[name]}")


def _checked_p_mins(values: list[Any] | None, p_min: Any) -> list[float]:
    """The p-min grid, or the one p-min asked for (it wins)."""
    p_mins = sorted({float(x) for x in values or P_MIN_GRID})
    if p_min is not None:
        p_mins = [float(p_min)]
    if any(not math.isfinite(x) or not 0 <= x <= 1 for x in p_mins):
        raise BenchmarkError(f"p-min must lie in [0, 1]; got {p_mins}")
    return p_mins


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise BenchmarkError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _checked_concurrency(values: list[Any] | None, slots: Any, via: str) -> tuple[list[int], int | None]:
    """The concurrent clients (several only through llama-server) and the servers' slots (-np)."""
    clients = sorted({int(c) for c in values or [1]})
    if any(c < 1 or c > settings.SPECREG_MAX_CLIENTS for c in clients):
        raise BenchmarkError(f"clients must be between 1 and {settings.SPECREG_MAX_CLIENTS}; got {values}")
    if clients != [1] and via != "server":
        raise BenchmarkError("several clients are measured through llama-server: add --via server")
    parallel = int(slots) if slots is not None else None
    if parallel is not None and not 1 <= parallel <= settings.SPECREG_MAX_CLIENTS:
        raise BenchmarkError(f"parallel (-np) must be between 1 and {settings.SPECREG_MAX_CLIENTS}; got {parallel}")
    return clients, parallel


def _checked_content_types(types: list[str] | None, task_set: TaskSet) -> list[str] | None:
    if types:
        missing = [t for t in types if t not in task_set.content_types]
        if missing:
            raise BenchmarkError(
                f"content type(s) {', '.join(missing)} not in the task set (have: {', '.join(task_set.content_types)})"
            )
    return types


def _check_process_count(p: dict[str, Any], n_types: int) -> None:
    n = process_count(p, n_types)
    cap = settings.SPECREG_MAX_PROCESSES_PER_RUN
    if n > cap:
        raise BenchmarkError(
            f"this benchmark would start up to {n:,} llama.cpp processes, more than the {cap:,} "
            "allowed per run (SPECREG_MAX_PROCESSES_PER_RUN): ask for fewer K values, "
            "temperatures, content types, prompts or repeats"
        )
