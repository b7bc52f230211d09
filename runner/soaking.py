"""Soaks as runs: what a pair or a deployment soaks, queueing one (``manage.py soak``, the "Soak test" buttons, the
API), and its record kept as a ``StabilityResult`` that is written at every interval, so the page plots it while it
runs and a killed or stopped worker leaves the partial record, marked.

A soak is a ``BenchmarkRun`` with ``params["mode"] == "soak"``: it goes to the hardware's benchmark queue and
occupies that worker for its whole duration, is cancelled like any run, and a worker stopped with SIGTERM ends it
as "interrupted" with what it recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from inspector.spec_flags import MAX_K, Setting, uses_draft_file
from registry.models import BenchmarkResult, BenchmarkRun, GGUFFile, Pair, StabilityResult, speculation_setting
from registry.results.figures import figures_for
from registry.results.recommend import best_gain

from .hardware import figure_label
from .heartbeat import Reporter
from .params import BenchmarkError
from .prompts import TaskSet, read_chat_template, render_prompt
from .soak import SoakConfig, SoakError, SoakRecord, run_soak

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
        from registry.team.models import Deployment

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


def queue_soak(
    ref: str,
    *,
    duration_s: float = DEFAULT_DURATION_S,
    clients: int = 1,
    interval_s: float = DEFAULT_INTERVAL_S,
    request_timeout_s: float | None = None,
    method: str | None = None,
    k: int | None = None,
    n_predict: int | None = None,
    user=None,
    hardware: str | None = None,
    send: bool = True,
) -> BenchmarkRun:
    from .submit import queue_benchmark

    soak = soak_params(duration_s, clients, interval_s, request_timeout_s)
    # A soak holds the hardware's benchmark worker for its whole duration: long ones are for staff (and the shell).
    user_hours = settings.SPECREG_SOAK_MAX_HOURS_USER
    if getattr(user, "is_authenticated", False) and not user.is_staff and duration_s > user_hours * 3600:
        raise BenchmarkError(
            f"a soak of more than {user_hours:g} h holds the benchmark worker too long for a non-staff account "
            "(SPECREG_SOAK_MAX_HOURS_USER): ask a staff member, or run a shorter one"
        )
    t = soak_target(ref, method=method, k=k)
    s = t.setting
    soak |= {
        "method": s.method,
        "k": s.k,
        "p_min": s.p_min,
        "options": [list(o) for o in s.options],
        "parallel": t.parallel if t.parallel and t.parallel >= clients else clients,
        "deployment": t.deployment_id,
        "basis": t.basis,
    }
    alone = not uses_draft_file(s.method)
    params = {"mode": "soak", "soak": soak, "methods": [s.method], "repeats": 1, "n_predict": n_predict}
    return queue_benchmark(
        t.pair,
        params,
        user=user,
        hardware=hardware,
        send=send,
        target_alone=alone,
        files=(t.target, t.target if alone else t.draft),
    )


def soak_prompts(task_set: TaskSet, target: str) -> tuple[str, ...]:
    """Every prompt of the task set, content types taken in turn, rendered with the target's chat template."""
    try:
        template = read_chat_template(target)
    except (OSError, ValueError):
        template = None
    by_type = [task_set.by_type(t) for t in task_set.content_types]
    tasks = [tasks[i] for i in range(max(map(len, by_type), default=0)) for tasks in by_type if i < len(tasks)]
    return tuple(render_prompt(t.prompt, template, t.system).text for t in tasks)


def execute_soak(
    run: BenchmarkRun,
    target: str,
    draft: str | None,
    task_set: TaskSet,
    hw: dict,
    build: Any,
    reporter: Reporter,
    caps: Any,
    gpu_layers: int | None,
) -> tuple[str, str | None]:
    """Run a queued soak and keep its record; the run's status: done (whatever the verdict), failed when it could
    not start, cancelled when cancelled or stopped."""
    soak = run.params["soak"]
    setting = Setting(soak["method"], soak["k"], soak.get("p_min"), tuple(tuple(o) for o in soak.get("options") or ()))
    config = SoakConfig(
        target=target,
        draft=draft if uses_draft_file(setting.method) else None,
        setting=setting,
        prompts=soak_prompts(task_set, target),
        duration_s=float(soak["duration_s"]),
        interval_s=float(soak["interval_s"]),
        clients=int(soak["clients"]),
        parallel=int(soak.get("parallel") or 0),
        n_predict=int(run.params.get("n_predict") or 128),
        threads=run.params.get("threads"),
        gpu_layers=gpu_layers,
        request_timeout_s=float(soak["request_timeout_s"]),
        memory_growth=settings.SPECREG_SOAK_MEMORY_GROWTH,
        error_share=settings.SPECREG_SOAK_ERROR_SHARE,
    )
    row = StabilityResult.objects.create(
        run=run,
        pair=run.pair,
        deployment_ref=soak.get("deployment"),
        k=setting.k,
        method=setting.method,
        p_min=setting.p_min,
        options=[list(o) for o in setting.options],
        clients=config.clients,
        parallel=config.slots,
        planned_s=int(config.duration_s),
        interval_s=int(config.interval_s),
        content_type="",
        hardware=figure_label(hw),
        llama_cpp_build=build.label[:32],
    )

    def write(record: SoakRecord) -> None:
        try:
            _store(row, record)
        except DatabaseError:
            pass  # the next interval writes again; the record is kept in memory until the end

    try:
        record = run_soak(
            config, caps, on_interval=write, should_cancel=reporter.should_cancel, progress=reporter.progress
        )
    except SoakError as exc:
        StabilityResult.objects.filter(pk=row.pk).update(
            status=StabilityResult.FAILED, verdict=f"could not start: {exc}"[:500], finished_at=timezone.now()
        )
        return BenchmarkRun.FAILED, f"soak: {exc}"
    _store(row, record, finished=True)
    BenchmarkRun.objects.filter(pk=run.pk).update(
        summary={"mode": "soak", "status": record.status, "verdict": record.verdict, "stability": row.pk},
    )  # the command soaked names this worker's paths: kept on the record (staff), not shown as a deploy command
    if record.status in (StabilityResult.CANCELLED, StabilityResult.INTERRUPTED):
        return BenchmarkRun.CANCELLED, record.verdict
    return BenchmarkRun.DONE, None


def _store(row: StabilityResult, record: SoakRecord, *, finished: bool = False) -> None:
    rng = record.acceptance_range
    fields: dict[str, Any] = {
        "status": record.status,
        "verdict": record.verdict[:500],
        "command": record.command,
        "elapsed_s": record.elapsed_s,
        "intervals": record.as_dicts(),
        "requests": record.total("requests"),
        "errors": record.total("errors"),
        "timeouts": record.total("timeouts"),
        "rss_start_mb": record.rss_start_mb,
        "rss_end_mb": record.rss_end_mb,
        "acceptance": record.acceptance,
        "acceptance_min": rng[0] if rng else None,
        "acceptance_max": rng[1] if rng else None,
        "compared": record.total("compared"),
        "differing": record.total("differing"),
        "prompt_repeats": record.prompt_repeats,
        "tokens_per_second": record.tokens_per_second,
        "baseline_tokens_per_second": record.baseline_tokens_per_second,
        "speedup": (
            record.tokens_per_second / record.baseline_tokens_per_second
            if record.tokens_per_second and record.baseline_tokens_per_second
            else None
        ),
    }
    if finished:
        fields["finished_at"] = timezone.now()
    StabilityResult.objects.filter(pk=row.pk).update(**fields)
