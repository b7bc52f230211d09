"""A decode's cost at the task's own context: llama.cpp attends over the KV cache's used cells in steps of 256, so the
cost model times a batch of one behind half its depth too, and predictions price each task's decode calls at the
cells its own prompt and tokens fill."""

from __future__ import annotations

import time

import pytest

from inspector.spec_flags import Setting
from runner.llama import binaries
from runner.models import CostMeasurement
from runner.predict import conditions, prediction, replay
from runner.predict.conditions import Conditions
from runner.predict.prediction import CostModel, context_cells, kv_cells, round_residual
from runner.predict.round_cost import RoundRun

TIMED = CostModel("t.gguf", 256, (0.030, 0.050, 0.060), sample=0.001, seconds_last=(0.030, 0.045, 0.055))


def test_the_attended_cells_step_by_256():
    assert [kv_cells(n) for n in (1, 255, 256, 257, 512, 513)] == [256, 256, 256, 512, 512, 768]
    assert context_cells(100, 100) == 256  # every call within the first step
    # a prompt of 200 tokens and 100 more: the calls with 201-256 cells in use attend over 256, the other 44 over 512
    assert context_cells(200, 100) == pytest.approx((56 * 256 + 44 * 512) / 100)
    assert context_cells(300, 0) == 512


def test_a_task_behind_a_shorter_context_is_priced_by_the_step_measured():
    # timed behind 256 tokens (512 cells) and, for a batch of one, behind 128 (256 cells): 2 ms apart
    cost = TIMED.__class__(**{**TIMED.__dict__, "depth_lo": 128, "seconds_lo": 0.028})
    assert cost.per_cell == pytest.approx(0.002 / 256)
    short = cost.at_context(256)
    assert short.seconds == pytest.approx((0.028, 0.048, 0.058))  # every batch, by the same step
    assert short.seconds_last == pytest.approx((0.028, 0.043, 0.053))
    assert short.token() == pytest.approx(0.028 + 0.001)
    assert cost.at_context(768).batch(1) == pytest.approx(0.032)  # one step further: dearer
    assert cost.at_context(512) is cost  # where it was timed


def test_predict_json_says_what_the_context_moved():
    cost = TIMED.__class__(**{**TIMED.__dict__, "depth_lo": 128, "seconds_lo": 0.028})
    p = prediction.Prediction(
        "draft-simple", "d.gguf", 4, 0.0, "code", "K=4", spec_context_s=-0.1, plain_context_s=-0.2
    )
    assert (p.to_dict()["spec_context_s"], p.to_dict()["plain_context_s"]) == (-0.1, -0.2)
    run = prediction.PredictionRun([p], {"target": cost})
    shown = run.to_dict()["cost_model"]["target"]
    assert shown["per_cell_s"] == pytest.approx(0.002 / 256) and shown["seconds_lo"] == 0.028


def test_no_step_is_priced_where_none_was_measured_or_the_shallower_read_slower():
    assert TIMED.per_cell == 0 and TIMED.at_context(256) is TIMED  # a record from before the shallower timing
    slower = TIMED.__class__(**{**TIMED.__dict__, "depth_lo": 128, "seconds_lo": 0.033})
    assert slower.per_cell == 0  # the machine moved between the two more than the step: priced as timed
    same = TIMED.__class__(**{**TIMED.__dict__, "depth": 200, "depth_lo": 100, "seconds_lo": 0.020})
    assert same.per_cell == 0  # both attend over 256 cells: no step between them


def test_the_round_residual_is_taken_against_parts_priced_at_the_runs_own_context():
    cost = TIMED.__class__(**{**TIMED.__dict__, "depth_lo": 128, "seconds_lo": 0.026})
    setting = Setting("draft-simple", 2, 0.0)
    # rounds of K 2 behind a prompt of 40 tokens: every call attends over 256 cells, 4 ms less than timed, and the
    # rounds took exactly their parts there
    at_run = cost.at_context(256)
    run = RoundRun(k=2, decode_s=0.0, n_decoded=13, n_drafted=8, n_accept=8, n_encoded=40)
    parts = sum(prediction.modelled_step(setting, d, at_run, at_run) for d in run.drafted_per_round())
    run = RoundRun(k=2, decode_s=parts, n_decoded=13, n_drafted=8, n_accept=8, n_encoded=40)
    assert round_residual(run, cost, cost) == pytest.approx(0.0, abs=1e-12)  # exactly its parts at its context
    assert round_residual(run, TIMED, TIMED) < 0  # priced at the timed context, it would read as a saving


GEN = binaries.GenParams(n_predict=8, threads=2)


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """The records in a cache of the test's own, not the user's."""
    monkeypatch.setenv("SPECREG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.llama
@pytest.mark.django_db
def test_the_cost_model_times_a_batch_of_one_behind_half_its_depth(smollm2_path, own_cache, monkeypatch):
    # beside other tests the measurement may be disturbed: this test is about what is timed and kept, not retaken
    monkeypatch.setattr(conditions, "quiet_now", lambda window_s=0.5: False)
    cost = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert cost.depth == prediction.COST_DEPTH and cost.depth_lo == prediction.COST_DEPTH // 2
    assert cost.seconds_lo is not None and cost.seconds_lo > 0
    assert kv_cells(cost.depth_lo + 1) < kv_cells(cost.depth + 1)  # the two lie on either side of a step
    row = CostMeasurement.objects.get()
    assert row.data["depth_lo"] == cost.depth_lo and row.data["spread_lo"] >= 0
    # kept: the same figures come back from the record
    again = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert again.source in ("kept", "checked") and again.seconds_lo == cost.seconds_lo


@pytest.mark.django_db
def test_the_hardware_page_shows_the_batch_of_one_behind_the_shallower_context(client):
    common = {"model_sha256": "f" * 64, "model_name": "q15.gguf", "model_size": 1, "build": "11434.0.0",
              "hardware_class": "cpu-2c/avx2", "host": "a", "threads": 2}  # fmt: skip
    quiet = Conditions(0.01, 0.02, time.time()).to_dict()
    data = {"depth": 256, "seconds": [0.0262, 0.05], "depth_lo": 128, "seconds_lo": 0.0246, "conditions": quiet}
    CostMeasurement.objects.create(key="t", depth=256, data=data, **common)
    html = client.get("/hardware/cpu-2c/").content.decode()
    assert '256<br><span class="muted small">1 token: 24.6 ms at 128</span>' in html


@pytest.mark.llama
@pytest.mark.django_db
def test_a_record_timed_over_more_batch_sizes_serves_a_prediction_of_fewer(smollm2_path, own_cache, monkeypatch):
    monkeypatch.setattr(conditions, "quiet_now", lambda window_s=0.5: False)  # kept as it is, disturbed or not
    wide = prediction.measure_cost(smollm2_path, GEN, 4, reps=3)
    assert len(wide.seconds) == 4

    def no_run(*args, **kwargs):
        raise AssertionError("timed again")

    real = replay.run_tool
    monkeypatch.setattr(replay, "run_tool", no_run)
    narrow = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert narrow.source == "kept" and narrow.seconds == wide.seconds and CostMeasurement.objects.count() == 1
    with pytest.raises(AssertionError, match="timed again"):  # more than any record holds is timed
        prediction.measure_cost(smollm2_path, GEN, 5, reps=3)
    # where the wider record no longer stands, only the sizes asked for are timed again, beside it
    monkeypatch.setattr(replay, "run_tool", real)
    monkeypatch.setattr(prediction, "_reuse", lambda *args: "remeasure")
    again = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert again.source == "remeasured" and len(again.seconds) == 3 and CostMeasurement.objects.count() == 2
