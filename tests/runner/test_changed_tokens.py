"""An adapted draft's acceptance where the target writes a token whose meaning changed: the ids come from
the adapted file's own provenance, the rate from the draft's teacher-forced pass."""

from __future__ import annotations

from runner.predict.changed_tokens import ChangedTally, adapted_ids
from runner.predict.prediction import PredictionRun


def test_the_changed_ids_are_read_from_the_adapted_files_provenance(adapted, qwen05):
    out, answer = adapted
    ids = adapted_ids(out)
    # R1-Distill's seven special tokens at Qwen's ids 151,643-151,649 (the near-miss adapting was made for)
    assert ids == frozenset(range(151_643, 151_650))
    assert ids == frozenset(answer["changed_ids"])
    assert adapted_ids(qwen05) == frozenset()  # the original draft: nothing changed meaning


def test_positions_of_changed_tokens_are_counted_apart_and_called_low_when_they_cost_acceptance():
    changed = frozenset({7, 9})
    tally = ChangedTally()
    truth = [1, 7, 2, 3, 9, 4, 7, 5, 6, 8]
    proposed = [1, 0, 2, 3, 9, 4, 0, 5, 6, 8]  # right everywhere but at two of the three changed positions
    tally.add(proposed, truth, changed)
    d = tally.to_dict()
    assert (d["positions"], d["draft_agrees"]) == (3, 1)
    assert d["rate"] == round(1 / 3, 4) and d["overall_rate"] == 0.8 and d["low"] is True
    fine = ChangedTally()
    fine.add(truth, truth, changed)
    assert fine.to_dict()["low"] is False and fine.to_dict()["rate"] == 1.0
    assert ChangedTally().to_dict() == {
        "positions": 0, "draft_agrees": 0, "rate": None, "overall_rate": None, "low": False,
    }  # fmt: skip


def test_only_a_prediction_with_an_adapted_draft_reports_them():
    assert "changed_tokens" not in PredictionRun([], {}).to_dict()
    run = PredictionRun([], {}, changed_tokens={"code": ChangedTally(3, 1, 10, 8).to_dict()})
    assert run.to_dict()["changed_tokens"]["code"]["low"] is True
