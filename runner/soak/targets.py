"""What a soak runs: a pair's recommended setting or a team deployment's, its duration and bounds. Queueing one is
runner.runs.submit.queue_soak; executing it, runner.runs.execute_soak.

A soak is a ``BenchmarkRun`` of ``kind`` "soak": it goes to the hardware's benchmark queue and
occupies that worker for its whole duration, is cancelled like any run, and a worker stopped with SIGTERM ends it
as "interrupted" with what it recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from inspector.spec_flags import MAX_K, Setting
from registry.models import BenchmarkResult, GGUFFile, Pair, speculation_setting
from registry.results.figures import figures_for
from registry.results.recommend import best_gain
from registry.team.models import Deployment
from runner.errors import BenchmarkError

DEFAULT_DURATION_S = 3600
DEFAULT_INTERVAL_S = 60
MAX_DURATION_CHARS = 16  # "1.5 hours" and the like: the form, the API and the parser all stop there
# Matched whole after strip(), so the one run of white space left, between the number and its unit, is read one
# way: two ``\s*`` around an optional unit let "1" + 200,000 spaces + "x" backtrack for minutes.
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hours?)?", re.I)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``1h``, ``1.5h`` → seconds."""
    text = str(text)
    if len(text) > MAX_DURATION_CHARS:  # refused before any pattern reads it
        raise BenchmarkError(f"a duration is at most {MAX_DURATION_CHARS} characters: write 90s, 30m or 1h")
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise BenchmarkError(f"duration {text!r} is not one: write 90s, 30m or 1h")
    unit = (m.group(2) or "s").lower()[0]
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[unit]


@dataclass(frozen=True)
class SoakTarget:
    """What a soak runs: the pair, the two files, the setting, and the deployment it stands for (if any)."""

    pair: Pair
    target: GGUFFile
    draft: GGUFFile
    setting: Setting
    parallel: int | None
    deployment_id: int | None
    basis: str  # one sentence: where the setting comes from


def _best_measured(pair: Pair) -> BenchmarkResult | None:
    """The measured setting the pair page recommends: its fastest gain that counts (registry.results.recommend)."""
    best = best_gain(figures_for([pair.pk])[pair.pk]["measured"])
    return best.obj if best is not None else None


def bounded_parallel(r: BenchmarkResult | None) -> int | None:
    """A result's -np, within the benchmark's bound: an imported result may say 32,767 (a -c of ~67M tokens)."""
    if r is None or r.parallel is None:
        return None
    if not 1 <= r.parallel <= settings.SPECREG_MAX_CLIENTS:
        raise BenchmarkError(
            f"the measured setting ran {r.parallel} slots (-np); a soak runs 1 to {settings.SPECREG_MAX_CLIENTS} "
            "(SPECREG_MAX_CLIENTS)"
        )
    return r.parallel


def soak_target(ref: str, *, method: str | None = None, k: int | None = None) -> SoakTarget:
    """``12`` or ``pair:12`` (a pair's recommended setting) or ``deployment:3`` (a team deployment's)."""
    t = _soak_target(ref, method=method, k=k)
    if t.setting.k is not None and not 1 <= t.setting.k <= MAX_K:  # an imported result's K, or one asked for
        raise BenchmarkError(f"K={t.setting.k}: a soak runs K from 1 to {MAX_K}")
    return t


def _soak_target(ref: str, *, method: str | None, k: int | None) -> SoakTarget:
    kind, _, ident = str(ref).strip().rpartition(":")
    kind = kind or "pair"
    if kind not in ("pair", "deployment") or not ident.isdigit():
        raise BenchmarkError(f"{ref!r} names no pair or deployment: write 12, pair:12 or deployment:3")
    if kind == "deployment":
        dep = Deployment.objects.select_related("target", "draft", "pair", "run").filter(pk=int(ident)).first()
        if dep is None:
            raise BenchmarkError(f"no deployment {ident}")
        if dep.pair is None:
            raise BenchmarkError(f"deployment {ident} names no pair of registered files to soak")
        chosen = method or dep.method
        if chosen == "none":
            raise BenchmarkError(f"deployment {ident} does not speculate: nothing to soak but the target alone")
        kk = k or dep.k or 8
        if not 1 <= kk <= MAX_K:
            # A deployment may record K up to 1,024 (what a team runs); what reaches llama-server's argv keeps the
            # benchmark's bound.
            raise BenchmarkError(f"deployment {ident}'s K={kk}: a soak runs K from 1 to {MAX_K}")
        r = None
        if dep.run is not None:
            r = dep.run.results.filter(method=chosen, k=kk, status="ok").order_by("-speedup").first()
        setting = speculation_setting(r) if r is not None else Setting(chosen, kk)
        draft = dep.draft or dep.target
        return SoakTarget(
            dep.pair, dep.target, draft, setting, bounded_parallel(r), dep.pk, f"deployment {dep.pk}'s setting"
        )
    pair = Pair.objects.select_related("target", "draft").filter(pk=int(ident)).first()
    if pair is None:
        raise BenchmarkError(f"no pair {ident}")
    if method:
        s = Setting(method, k or 8)
        return SoakTarget(pair, pair.target, pair.draft, s, None, None, f"{s.label}, as asked")
    best = _best_measured(pair)
    if best is None:
        raise BenchmarkError(
            f"pair {ident} has no measured setting faster than the target alone to soak: benchmark it first, "
            "or name one with --method and --k"
        )
    return SoakTarget(
        pair,
        best.run.measured_target,
        best.run.measured_draft,
        speculation_setting(best),
        bounded_parallel(best),
        None,
        f"the best measured setting (run {best.run_id}, {best.speedup:.2f}x)",
    )


def soak_params(duration_s: float, clients: int, interval_s: float, request_timeout_s: float | None) -> dict[str, Any]:
    """Checked soak parameters (one line for each that is out of bounds)."""
    longest = settings.SPECREG_SOAK_MAX_HOURS * 3600
    if not 0 < duration_s <= longest:
        raise BenchmarkError(
            f"a soak lasts more than 0 s and at most {settings.SPECREG_SOAK_MAX_HOURS:g} h "
            f"(SPECREG_SOAK_MAX_HOURS); got {duration_s:g} s"
        )
    if not 1 <= clients <= settings.SPECREG_MAX_CLIENTS:
        raise BenchmarkError(f"clients must be between 1 and {settings.SPECREG_MAX_CLIENTS}; got {clients}")
    interval_s = min(interval_s, duration_s)  # a soak shorter than an interval records once, at its end
    if interval_s < 5:
        raise BenchmarkError("a soak records at most every 5 s: give a duration and an interval of 5 s or more")
    timeout = float(request_timeout_s or settings.SPECREG_SOAK_REQUEST_TIMEOUT_S)
    if not 1 <= timeout <= 3600:
        raise BenchmarkError(f"the request time-out must be between 1 and 3600 s; got {timeout:g}")
    return {"duration_s": duration_s, "clients": clients, "interval_s": interval_s, "request_timeout_s": timeout}
