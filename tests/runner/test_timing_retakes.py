"""A cost model's retake times again only the batch sizes whose repeats spread or that ran beside other work, each
size keeping its steadiest take; the timing tool (real llama.cpp, SmolLM2) times exactly the sizes it is asked for;
a batch beyond the timed ones follows the slope over several sizes, not the last two."""

from __future__ import annotations

import json
import os

import pytest

from runner.llama import binaries
from runner.predict import conditions, prediction, replay
from runner.predict.prediction import CostModel
from runner.predict.timing_retakes import retaking


def test_a_batch_beyond_the_timed_ones_follows_the_slope_over_several_sizes():
    # batch costs timed on AVX-512 (ms): a batch of a multiple of 4 tokens is cheaper than the one before it
    ms = (78.2, 117.1, 147.1, 133.0, 170.6, 200.6, 229.4, 266.2, 294.0, 311.3, 326.0, 321.9, 344.3, 337.7, 354.6, 329.0)
    cost = CostModel("m", 256, tuple(x / 1000 for x in (*ms, 404.5)), 0.0)
    assert cost.batch(17) == pytest.approx(0.4045)
    # the last two sizes alone would give 75.5 ms a token (a batch of 33 at 1612 ms; it was timed at 679)
    assert cost.batch(33) == pytest.approx((404.5 + 16 * (404.5 - 294.0) / 8) / 1000)
    assert CostModel("m", 256, (0.01, 0.02), 0.0).batch(4) == pytest.approx(0.04)
    assert CostModel("m", 256, (0.01,), 0.0).batch(3) == pytest.approx(0.03)


def _timing(sizes, seconds_per_token, spread_of_size):
    return {
        "depth": 256,
        "sample_s": 0.001,
        "batch": sizes,
        "seconds": [seconds_per_token * b for b in sizes],
        "seconds_last": [seconds_per_token * b * 0.8 for b in sizes],
        "spread": [spread_of_size(b) for b in sizes],
        "depth_lo": 128,
        "seconds_lo": seconds_per_token * 0.9,
        "spread_lo": 0.01,
    }


def test_a_retake_times_only_the_sizes_that_spread_and_keeps_each_sizes_steadiest(monkeypatch):
    monkeypatch.setattr(conditions, "other_cpu_share", lambda *_: 0.01)
    asked = []
    takes = iter(
        [
            (0.010, lambda b: 0.40 if b in (13, 17) else 0.02),  # the two largest spread
            (0.011, lambda b: 0.30 if b == 17 else 0.03),  # 13 steady now, 17 less spread than before
            (0.012, lambda b: 0.05),
        ]
    )

    def timed(sizes):
        asked.append(list(sizes))
        per_token, spread = next(takes)
        return _timing(sizes, per_token, spread)

    data, cond = conditions.quietly(retaking(timed, list(range(1, 18))), attempts=2)
    assert asked == [list(range(1, 18)), [13, 17], [17]]
    assert not cond.disturbed and cond.attempts == 3
    assert data["batch"] == list(range(1, 18))
    by_size = dict(zip(data["batch"], data["seconds"], strict=True))
    assert by_size[1] == pytest.approx(0.010) and by_size[13] == pytest.approx(0.011 * 13)
    assert by_size[17] == pytest.approx(0.012 * 17)
    assert max(data["spread"]) == pytest.approx(0.05)


def test_a_take_beside_other_work_is_taken_again_whole_and_the_least_disturbed_size_kept(monkeypatch):
    asked = []
    # other work held the CPU during the first take only
    monkeypatch.setattr(conditions, "other_cpu_share", lambda *_: 0.60 if len(asked) == 1 else 0.01)

    def timed(sizes):
        asked.append(list(sizes))
        # the busy take's repeats agree (every one slowed alike); the quiet one's size 5 spreads
        return _timing(sizes, 0.02 if len(asked) == 1 else 0.01, lambda b: 0.30 if len(asked) == 2 and b == 5 else 0.02)

    data, cond = conditions.quietly(retaking(timed, list(range(1, 7))), attempts=1)
    assert asked == [list(range(1, 7)), list(range(1, 7))]  # other work slowed every size: all taken again
    by_size = dict(zip(data["batch"], data["seconds"], strict=True))
    assert by_size[1] == pytest.approx(0.01)  # the quiet take's
    assert by_size[5] == pytest.approx(0.01 * 5)  # spread, but not slowed by other work: still the less disturbed
    assert cond.disturbed and cond.spread == pytest.approx(0.30)


@pytest.mark.llama
def test_the_timing_tool_times_the_sizes_it_is_asked_for(smollm2_path, tmp_path):
    caps = binaries.capabilities(binaries.find_binary(replay.SPEC_TOOL))
    gen = binaries.GenParams(n_predict=1, threads=2, ctx_size=512, temperature=0.0)
    out = tmp_path / "timing.json"
    argv = prediction.timing_argv(replay.tool(), smollm2_path, binaries.generation_argv(caps, gen, "x"), out)
    env = {**os.environ, "SPECREG_TIMING": "128,13,2", "SPECREG_TIMING_SIZES": "1,4,13"}
    replay.run_tool(argv, 300, env)
    data = json.loads(out.read_text())
    assert data["batch"] == [1, 4, 13] and len(data["seconds"]) == len(data["seconds_last"]) == 3
    assert data["seconds"][2] > data["seconds"][0] > 0
    with pytest.raises(replay.ReplayError, match="SPECREG_TIMING_SIZES must list ascending batch sizes"):
        replay.run_tool(argv, 300, {**env, "SPECREG_TIMING_SIZES": "4,1"})
