"""Cost measurements that know their conditions: one taken beside a CPU hog is not kept silently as the machine's
figure, a kept disturbed one is taken again once the machine is quiet, and a kept one that no longer matches the
machine is measured again. Real llama.cpp timings of SmolLM2 through the replay tool."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from runner.llama import binaries
from runner.models import CostMeasurement
from runner.predict import conditions, kept, prediction
from runner.predict.conditions import Conditions, quietly, spread_of

HOG = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end: pass\n"


class Hog:
    """Processes that keep every core busy while the block runs."""

    def __enter__(self) -> Hog:
        self.procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(2)]
        time.sleep(0.3)
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def test_conditions_say_why_a_measurement_is_disturbed():
    quiet = Conditions(0.02, 0.03, time.time())
    assert not quiet.disturbed and quiet.why() == ""
    busy = Conditions(0.45, 0.30, time.time())
    assert busy.disturbed and busy.why() == "other work took 45% of the CPU; its repeats lay 30% apart"
    assert Conditions.from_dict(busy.to_dict()) == busy and Conditions.from_dict({"spread": 1}) is None
    assert spread_of([3.39, 5.68, 5.97]) == pytest.approx((5.97 - 3.39) / 5.68)  # a record seen in the field
    assert spread_of([2.46, 2.47, 2.51]) < conditions.MAX_SPREAD and spread_of([1.0, 2.0]) is None


def test_a_measurement_beside_a_cpu_hog_is_taken_again_and_kept_marked():
    calls = []

    def measure():
        calls.append(1)
        time.sleep(1.0)
        return "figures", None

    with Hog():
        value, cond = quietly(measure, attempts=1)
    assert value == "figures" and len(calls) == 2  # disturbed: taken again, still disturbed, kept marked
    assert cond.disturbed and cond.attempts == 2 and "of the CPU" in cond.why()
    # spread alone decides too: repeats far apart are taken again until they agree
    spreads = iter([0.4, 0.05])
    value, cond = quietly(lambda: ("x", next(spreads)), attempts=2)
    assert cond.attempts == 2 and cond.spread == 0.05


def test_where_every_attempt_is_disturbed_the_least_disturbed_is_kept_not_the_last(monkeypatch):
    # the attempts' own spreads decide here: other work's share (a clock tick read over an instant, under a parallel
    # test run) is held at a quiet machine's
    monkeypatch.setattr(conditions, "other_cpu_share", lambda *_: 0.01)
    taken = iter([("first", 0.40), ("second", 0.18), ("third", 0.30)])
    value, cond = quietly(lambda: next(taken), attempts=2)
    assert value == "second" and cond.spread == 0.18
    assert cond.disturbed and cond.attempts == 3  # marked, and says how many were taken


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECREG_COST_REMEASURE", "0")


GEN = binaries.GenParams(n_predict=8, threads=2)


@pytest.mark.llama
@pytest.mark.django_db
def test_a_cost_model_measured_beside_a_hog_is_marked_and_measured_again_when_quiet(smollm2_path, cache, monkeypatch):
    with Hog():
        busy = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert busy.source == "measured" and busy.disturbed and busy.conditions["disturbed"]
    row = CostMeasurement.objects.get()
    assert row.data["conditions"]["disturbed"] and "of the CPU" in row.data["conditions"]["why"]
    # still busy now: reused, and it says so
    monkeypatch.setattr(conditions, "quiet_now", lambda window_s=0.5: False)
    again = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert again.source == "kept" and again.disturbed
    # quiet now: measured again, the disturbed record replaced
    monkeypatch.setattr(conditions, "quiet_now", lambda window_s=0.5: True)
    fresh = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert fresh.source == "remeasured" and CostMeasurement.objects.count() == 1
    assert CostMeasurement.objects.get().data["conditions"]["measured_at"] > row.data["conditions"]["measured_at"]


@pytest.mark.llama
@pytest.mark.django_db
def test_a_kept_cost_model_that_no_longer_matches_the_machine_is_measured_again(smollm2_path, cache, monkeypatch):
    # beside other tests the first measurement may be disturbed: this test is about records reused, not retaken
    monkeypatch.setattr(conditions, "quiet_now", lambda window_s=0.5: False)
    first = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    # within its age it is trusted as kept
    assert prediction.measure_cost(smollm2_path, GEN, 3, reps=3).source == "kept"
    # a record five times slower than the machine (and quiet, as far as it says): past its age, one fresh batch of
    # a token finds it off, and it is measured again
    local = next((kept.local_path(kept.COSTS, smollm2_path, []).parent).glob("*.json"))
    data = json.loads(local.read_text())
    data["seconds"] = [5 * s for s in data["seconds"]]
    data["conditions"] = Conditions(0.0, 0.01, time.time()).to_dict()
    local.write_text(json.dumps(data))
    monkeypatch.setenv("SPECREG_COST_RECHECK_AFTER_S", "0")
    again = prediction.measure_cost(smollm2_path, GEN, 3, reps=3)
    assert again.source == "remeasured" and again.seconds[0] < 3 * first.seconds[0]
    # a record kept before conditions were recorded is checked the same way before reuse
    data = json.loads(local.read_text())
    data.pop("conditions")
    local.write_text(json.dumps(data))
    monkeypatch.setenv("SPECREG_COST_RECHECK_AFTER_S", "3600")
    assert prediction.measure_cost(smollm2_path, GEN, 3, reps=3).source in ("checked", "remeasured")


@pytest.mark.django_db
def test_the_hardware_page_shows_each_records_conditions(client):
    common = {"model_sha256": "f" * 64, "model_name": "q15.gguf", "model_size": 1, "build": "11434.0.0",
              "hardware_class": "cpu-2c/avx2", "host": "a", "threads": 2}  # fmt: skip
    busy = Conditions(0.45, 0.02, time.time()).to_dict()
    data = {"depth": 256, "seconds": [0.03, 0.05], "conditions": busy}
    CostMeasurement.objects.create(key="t", depth=256, data=data, **common)
    steady = Conditions(0.01, 0.03, time.time()).to_dict()
    quiet = {"round": {"k": 4, "decode_s": 1.0, "n_decoded": 49, "n_drafted": 44, "n_accept": 44}, "draft": "q05.gguf",
             "extra_per_call_s": 0.0007, "calls_per_round": 6, "conditions": steady}  # fmt: skip
    CostMeasurement.objects.create(key="r", depth=250, data=quiet, **common)
    html = client.get("/hardware/cpu-2c/").content.decode()
    assert '<span class="small warn">disturbed: others 45%, spread 2%' in html
    assert '+4.20 ms at K 4 with q05.gguf<br><span class="muted small">quiet: others 1%, spread 3%' in html
    other = {**common, "model_sha256": "e" * 64, "model_name": "old.gguf"}
    CostMeasurement.objects.create(key="o", depth=256, data={"depth": 256, "seconds": [0.03]}, **other)
    assert ">not recorded<" in client.get("/hardware/cpu-2c/").content.decode()


def test_predict_json_names_the_records_it_used_and_which_were_disturbed():
    busy = Conditions(0.45, 0.02, time.time()).to_dict()
    quiet = Conditions(0.01, 0.02, time.time()).to_dict()
    costs = {
        "target": prediction.CostModel("t.gguf", 256, (0.03, 0.05), source="kept", conditions=quiet),
        "draft": prediction.CostModel("d.gguf", 256, (0.01, 0.02), source="measured", conditions=busy),
    }
    out = prediction.PredictionRun([], costs).to_dict()
    assert out["disturbed_costs"] == ["draft"]
    assert out["cost_model"]["target"]["source"] == "kept" and out["cost_model"]["target"]["disturbed"] is False
    assert "45% of the CPU" in out["cost_model"]["draft"]["conditions"]["why"]
    assert out["cost_model"]["target"]["residual_used"] is True  # no share measured: priced as measured
