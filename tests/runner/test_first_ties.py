"""Where a real run may write another text than the prediction's: the first token of the target's greedy answer whose
margin over the runner-up is small, per task (prediction.first_ties) and per prediction (Prediction.first_tie), read
from the one transcript both use."""

from __future__ import annotations

import pytest

from inspector.spec_flags import Setting
from runner.predict import prediction, replay
from runner.prompts import Task, TaskSet

pytestmark = [pytest.mark.llama, pytest.mark.django_db]  # transcripts are kept in the database

TASKS = TaskSet(
    "ties",
    "two prompts a small model answers with near-ties",
    (
        Task("story", "prose", "Write three sentences about a lighthouse keeper who finds a letter."),
        Task("list", "prose", "Name five things people keep in a kitchen drawer, one per line."),
        Task("loop", "code", "Write a Python function that returns the sum of the squares of a list."),
    ),
)


def test_the_first_tie_per_task_is_the_predictions_and_costs_no_second_transcript(smollm2_path, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREG_CACHE_DIR", str(tmp_path / "cache"))
    ties = prediction.first_ties(smollm2_path, TASKS, ["prose", "code"], n_predict=24, max_k=4)
    assert set(ties) == {("prose", "story"), ("prose", "list"), ("code", "loop")}
    assert any(v is not None for v in ties.values())  # a 135M model is unsure somewhere in 24 tokens of prose
    assert all(v is None or 0 <= v < 24 for v in ties.values())
    made: list[list[str]] = []
    real = replay.run_tool

    def spy(argv, *args, **kwargs):
        if argv[1] == "transcript":
            made.append(argv)
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(replay, "run_tool", spy)
    run = prediction.predict(
        smollm2_path, None, [Setting("ngram-mod", 4, None)], TASKS, ["prose", "code"], n_predict=24
    )
    assert made == []  # the prediction read the transcripts first_ties made
    for p in run.predictions:
        found = [ties[(p.content_type, t.id)] for t in TASKS.by_type(p.content_type)]
        found = [x for x in found if x is not None]
        assert p.first_tie == (min(found) if found else None)
        assert (p.near_ties > 0) == bool(found) and p.to_dict()["first_tie"] == p.first_tie
