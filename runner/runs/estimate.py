"""How long a benchmark would take, estimated before it is queued from what this installation has measured.

A run starts a plain and a speculative llama.cpp process per setting, content type, temperature, prompt and repeat
(``runner.runs.params.process_count``), each generating ``n_predict`` tokens. What one generated token costs on a
hardware class, overhead included (loading, the prompt, the draft), comes from the runs this class has finished
of the same target model: their sweep's wall time over the tokens their processes generated. Where none has
finished, the target's cost model on the class (``runner.predict``) gives the decoding alone, a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from registry.formatting import duration
from registry.models import BenchmarkRun, GGUFFile
from runner.models import CostMeasurement
from runner.predict.kept import on_class
from runner.predict.runs import MEASURE_BEST, predictable_settings
from runner.runs.params import process_count

RUNS_READ = 5  # the newest finished runs an estimate reads


@dataclass(frozen=True)
class Speed:
    seconds_per_token: float  # one generated token of one process, on the class
    basis: str  # where the figure comes from, for the page
    lower_bound: bool  # decoding alone (a cost model): loading and prompts come on top


def measured_speed(target: GGUFFile, hardware_class: str) -> Speed | None:
    """What a generated token cost on ``hardware_class`` in its newest finished runs of ``target``'s model (any quant),
    else by the target file's cost model there; None when the class has measured neither."""
    same_model = Q(target_file__model__base_id=target.model.base_id) if target.model.base_id else Q(target_file=target)
    # a prediction or a soak generates no benchmark's tokens
    runs = BenchmarkRun.objects.filter(
        same_model, hardware_class=hardware_class, status=BenchmarkRun.DONE, kind=BenchmarkRun.BENCHMARK
    )
    seconds = tokens = 0.0
    ids = []
    for run in runs.order_by("-pk")[:RUNS_READ]:
        elapsed = run.summary.get("elapsed_s") if isinstance(run.summary, dict) else None
        made = sum(2 * r.n_prompts * r.repeats * r.n_predict for r in run.results.all())
        if isinstance(elapsed, (int, float)) and elapsed > 0 and made > 0:
            seconds, tokens = seconds + elapsed, tokens + made
            ids.append(f"#{run.pk}")
    if tokens:
        runs_said = f"{len(ids)} finished run{'s' if len(ids) > 1 else ''}"
        basis = f"{runs_said} of this target on {hardware_class} ({', '.join(ids)})"
        return Speed(seconds / tokens, basis, False)
    return _cost_model_speed(target, hardware_class)


def _cost_model_speed(target: GGUFFile, hardware_class: str) -> Speed | None:
    """The target file's newest cost model on the class: its one-token decode time (matched by sha256)."""
    if not target.content_sha256:
        return None
    cost = (
        CostMeasurement.objects.filter(on_class(hardware_class), model_sha256=target.content_sha256)
        .order_by("-created_at", "-pk")
        .first()
    )
    first = (cost.data.get("seconds") or [None])[0] if cost is not None and isinstance(cost.data, dict) else None
    if not isinstance(first, (int, float)) or first <= 0:
        return None
    return Speed(float(first), f"the target's cost model on {hardware_class} (decoding only)", True)


@dataclass(frozen=True)
class Estimate:
    every_setting_s: float  # measuring every setting
    predicted_first_s: float | None  # measuring the best MEASURE_BEST per content type after a prediction; None: no
    speed: Speed

    def sentence(self) -> str:
        """The estimate in words, as the benchmark form shows it (its script says the same as values change)."""
        bound = "at least " if self.speed.lower_bound else "about "
        full = f"{bound}{duration(self.every_setting_s)} to measure every setting"
        if self.predicted_first_s is None:
            return f"Estimate: {full}, from {self.speed.basis}."
        return (
            f"Estimate: {bound}{duration(self.predicted_first_s)} plus the prediction when every setting is predicted "
            f"first and the best {MEASURE_BEST} per content type measured; {full}. From {self.speed.basis}."
        )


def estimate(p: dict[str, Any], n_types: int, speed: Speed) -> Estimate:
    """The time a run of the normalized parameters ``p`` would take over ``n_types`` content types at ``speed``."""
    per_process = p["n_predict"] * speed.seconds_per_token
    full = process_count(p, n_types) * per_process
    predicted_first = None
    # runner.runs.execute predicts first under these conditions, then measures MEASURE_BEST settings per type.
    if not p.get("full_sweep") and 0.0 in p["temperatures"] and len(predictable_settings(p)[0]) > MEASURE_BEST:
        measured = n_types * len(p["temperatures"]) * MEASURE_BEST * p["prompts_per_type"] * p["repeats"] * 2
        predicted_first = min(full, measured * per_process)
    return Estimate(full, predicted_first, speed)
