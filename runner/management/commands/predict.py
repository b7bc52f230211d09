"""predict TARGET [DRAFT]: each setting's acceptance and speedup on this machine, predicted from the target's
transcript (replayed through llama.cpp's own speculative loop) and a cost model measured here, before any
benchmark. Temperature 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from inspector.compat import check_pair
from inspector.info import InspectError, inspect_source
from inspector.management.base import SpecregCommand, UserError, float_list, int_list
from inspector.spec_flags import Setting, uses_draft_file
from inspector.speculative import NGRAM_METHODS
from registry.models import GGUFFile
from runner import methods as methods_mod
from runner.predict import prediction as predict_mod
from runner.predict.replay import ReplayError
from runner.prompts import TaskSet, TaskSetError, load_task_set, parse_task_set

NOT_YET, TEMPERATURE_0_ONLY = predict_mod.NOT_YET, predict_mod.TEMPERATURE_0_ONLY


def _local(source: str) -> Path:
    """A local GGUF path, or the path of a registered local file (hf:// files are benchmarked after download)."""
    if source.startswith("hf://"):
        registered = GGUFFile.objects.filter(source=source).first()
        raise UserError(
            f"{source}: predict reads local files; "
            + ("download it first (run_benchmark downloads it)" if registered else "it is not even registered")
        )
    path = Path(source).expanduser()
    if not path.is_file():
        raise UserError(f"{source}: no such file")
    return path


class Command(SpecregCommand):
    help = (
        "Predict TARGET's speedup with DRAFT (draft-simple) or with the n-gram methods, per content type, K and "
        "p-min, from one transcript of the target and a cost model measured on this machine: no benchmark."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("target", help="the big model: a local GGUF path")
        parser.add_argument("draft", nargs="?", help="the small model that drafts (draft-simple)")
        parser.add_argument("--methods", help="e.g. draft-simple,ngram-mod (default: the draft's, then n-gram)")
        parser.add_argument("--k", type=int_list, default=[2, 4, 8], help="draft lengths, e.g. 2,4,8 (default)")
        parser.add_argument("--p-min", type=float_list, help="draft-model p-min values, e.g. 0,0.75 (default: 0)")
        parser.add_argument("--tasks", help="content types, e.g. code,prose (default: all in the task set)")
        parser.add_argument("--task-file", help="a JSON task set, as run_benchmark takes")
        parser.add_argument(
            "--prompts-per-type", type=int, default=2, help="prompts of each content type (default %(default)s)"
        )
        parser.add_argument("--n-predict", type=int, default=96, help="tokens per transcript (default %(default)s)")
        parser.add_argument("--threads", type=int, help="llama.cpp's -t (default: llama.cpp's own choice)")
        parser.add_argument("--json", action="store_true", help="print exactly one JSON object")
        parser.add_argument(
            "--temperature",
            type=float,
            default=0.0,
            help="above 0: expected counts for draft-simple over a sampled transcript (default 0)",
        )
        parser.add_argument(
            "--exact",
            action="store_true",
            help="replay every draft-model setting through llama.cpp's loop (default: one teacher-forced pass)",
        )

    def handle(self, *args: Any, **o: Any) -> None:
        target = _local(o["target"])
        draft = _local(o["draft"]) if o["draft"] else None
        _check_pair(target, draft)
        wanted = o["methods"].split(",") if o["methods"] else (["draft-simple"] if draft else []) + list(NGRAM_METHODS)
        try:
            chosen = methods_mod.check_methods([m.strip() for m in wanted], has_draft=draft is not None)
        except methods_mod.MethodError as exc:
            raise UserError(str(exc)) from None
        _check_limits(o)
        temp = o["temperature"]
        tasks, types = _tasks(o["task_file"], o["tasks"], o["prompts_per_type"])
        settings, why = _settings(chosen, o["k"], o["p_min"], temp)
        log = (lambda s: None) if o["json"] else (lambda s: self.stderr.write(s))
        try:
            run = predict_mod.predict(
                target,
                draft,
                settings,
                tasks,
                types,
                n_predict=o["n_predict"],
                threads=o["threads"],
                log=log,
                progress=lambda fraction, message: log(message),  # a line as each step starts; log says it ended
                exact=o["exact"],
                temperature=temp,
            )
        except ReplayError as exc:
            raise UserError(str(exc)) from None
        if o["json"]:
            self.stdout.write(json.dumps(json_answer(run, why, temp)))
            return
        self._write_table(run, why, temp)

    def _write_table(self, run: predict_mod.PredictionRun, why: dict[str, str], temp: float) -> None:
        """Every prediction, the best per content type, and the methods that were not predicted."""
        self.stdout.write(f"{'content type':14} {'setting':40} {'acceptance':>10} {'speedup':>8}")
        for p in run.predictions:
            acc = "–" if p.acceptance is None else f"{p.acceptance:.1%}"
            speed = "–" if p.speedup is None else f"{p.speedup:.2f}x"
            self.stdout.write(f"{p.content_type:14} {p.setting:40} {acc:>10} {speed:>8}")
        for ctype, b in run.best().items():
            self.stdout.write(f"best for {ctype}: {b['setting']} ({b['speedup']:.2f}x predicted)")
        for ctype, c in (run.changed_tokens or {}).items():  # an adapted draft: where the meaning of a token changed
            if c["positions"]:
                self.stdout.write(
                    f"{ctype}: the draft proposed {c['draft_agrees']} of {c['positions']} tokens whose meaning "
                    f"adapt_draft changed ({c['rate']:.0%}, against {c['overall_rate']:.0%} over every position)"
                    + ("; low: those tokens cost acceptance" if c["low"] else "")
                )
        for m, w in why.items():
            self.stdout.write(f"{m}: {w}")
        for name, cost in run.costs.items():  # measured while other work held the CPU, and it still does
            if cost.disturbed:
                held = cost.conditions if cost.conditions.get("disturbed") else cost.residual_conditions
                self.stderr.write(
                    f"warning: the {name}'s cost record was measured while the machine was busy ({held.get('why')}): "
                    "these speeds are slower than the machine's own; predict again when it is quiet"
                )
        took = ", ".join(f"{k} {v:.1f} s" for k, v in run.seconds.items())
        where = ""
        if run.offload is not None:  # which machine's timings these are: a GPU's and a CPU's differ many times over
            layers = "nothing offloaded" if run.offload.gpu_layers is None else f"-ngl {run.offload.gpu_layers}"
            where = f" on {run.offload.measurement_class}, {layers}"
        self.stdout.write(f"predicted in {took}{where} (temperature {temp:g}; a benchmark confirms it)")


def json_answer(run: predict_mod.PredictionRun, why: dict[str, str], temp: float) -> dict[str, Any]:
    """What ``--json`` prints: the run's predictions, best settings, seconds and cost models, the hardware class
    and measurement class its timings belong to and the GPU layers every process offloaded (``gpu_layers``, null
    on the CPU), the methods not predicted and why, and the temperature."""
    out = run.to_dict()
    out["not_predictable"] = [{"method": m, "why": w} for m, w in why.items()]
    out["temperature"] = temp
    return out


def _check_pair(target: Path, draft: Path | None) -> None:
    """Both files read, and the draft able to draft for the target (inspector.compat)."""
    try:
        t_info = inspect_source(str(target))
        d_info = inspect_source(str(draft)) if draft else None
    except InspectError as exc:
        raise UserError(str(exc)) from None
    if draft is not None and d_info is not None:
        check = check_pair(t_info, d_info)
        if not check.compatible:
            failed = next(c for c in check.checks if c.rule == check.failed_rule)
            raise UserError(
                f"{draft.name} cannot draft for {target.name}: rule '{failed.rule}' fails ({failed.detail})"
            )


def _check_limits(o: dict[str, Any]) -> None:
    if not 1 <= o["n_predict"] <= 4096 or not 1 <= o["prompts_per_type"] <= 50:
        raise UserError("--n-predict must be 1..4096 and --prompts-per-type 1..50")
    if any(not 1 <= k <= 64 for k in o["k"]):
        raise UserError("K must be between 1 and 64")
    temp = o["temperature"]
    if not 0.0 <= temp <= 2.0:  # NaN fails this too
        raise UserError("--temperature must be between 0 and 2")
    if temp > 0 and o["exact"]:
        raise UserError("--exact replays by exact match: temperature 0 only")


def _tasks(task_file: str | None, wanted: str | None, per_type: int) -> tuple[TaskSet, list[str]]:
    """The task set cut to the content types asked for and ``per_type`` prompts of each, and those types."""
    try:
        tasks = parse_task_set(json.loads(Path(task_file).read_text()), task_file) if task_file else load_task_set()
    except (OSError, ValueError, TaskSetError) as exc:
        raise UserError(f"{task_file}: {exc}") from None
    types = wanted.split(",") if wanted else list(tasks.content_types)
    unknown = [t for t in types if t not in tasks.content_types]
    if unknown:
        raise UserError(f"no tasks of type {', '.join(unknown)} (the task set has {', '.join(tasks.content_types)})")
    cut = type(tasks)(tasks.name, tasks.description, tuple(t for c in types for t in tasks.by_type(c)[:per_type]))
    return cut, types


def _settings(
    chosen: list[str], ks: list[int], p_min: list[float] | None, temp: float
) -> tuple[list[Setting], dict[str, str]]:
    """The settings to predict, and why each chosen method that is not predicted is not."""
    p_mins: list[float | None] = list(p_min) if p_min else [0.0]
    settings = [
        s
        for m in chosen
        if predict_mod.predictable(m)
        for s in methods_mod.settings_for(m, ks, p_mins if uses_draft_file(m) else [None])
    ]
    why = {m: NOT_YET for m in chosen if not predict_mod.predictable(m)}
    if temp > 0:  # only a draft model's acceptance has a distribution to be read above 0
        why |= {m: TEMPERATURE_0_ONLY for m in chosen if predict_mod.predictable(m) and m != "draft-simple"}
        settings = [s for s in settings if s.method == "draft-simple"]
    return settings, why
