"""A measured acceptance far from its prediction, where the texts parted, says why beside the figure."""

from __future__ import annotations

from registry.models import BenchmarkResult, PredictedResult
from runner.predict.runs import acceptance_apart


def _measured(acceptance: float, identical: bool | None, positions: list[int]) -> BenchmarkResult:
    divergences = [{"prompt_index": i, "repeat": 0, "position": p} for i, p in enumerate(positions)]
    return BenchmarkResult(
        status="ok", acceptance=acceptance, identical=identical, divergences=divergences, speculation_ran=True,
        drafted=40,
    )  # fmt: skip


def _predicted(acceptance: float, ties: int = 3) -> PredictedResult:
    return PredictedResult(acceptance=acceptance, drafted=40, accepted=int(40 * acceptance), near_ties=ties)


def test_parted_texts_far_apart_say_where_they_parted():
    why = acceptance_apart(_measured(0.599, False, [195, 99]), _predicted(0.528))
    assert why is not None
    assert "character 99" in why and "52.8%" in why and "3 near-ties" in why  # the earliest parting, not the first


def test_close_or_same_text_says_nothing():
    assert acceptance_apart(_measured(0.55, False, [40]), _predicted(0.528)) is None  # within the points allowed
    assert acceptance_apart(_measured(0.70, True, []), _predicted(0.528)) is None  # same text: an error, not a limit
    assert acceptance_apart(_measured(0.70, None, []), _predicted(0.528)) is None  # sampled: not compared
    assert acceptance_apart(_measured(0.70, False, [10]), None) is None
