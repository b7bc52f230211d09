"""Executing a queued soak (runner.soak.loop) as a run: its record kept as a ``StabilityResult`` that is written at
every interval, so the page plots it while it runs and a killed or stopped worker leaves the partial record,
marked."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from inspector.spec_flags import Setting, uses_draft_file
from registry.models import BenchmarkRun, StabilityResult
from runner.hardware import figure_label
from runner.prompts import TaskSet, read_chat_template, render_prompt
from runner.runs.heartbeat import Reporter
from runner.soak.loop import SoakConfig, SoakError, SoakRecord, run_soak


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
