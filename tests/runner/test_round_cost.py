"""A speculative round's cost beyond its modelled parts: measured with real rounds of llama.cpp,
kept per model file and machine, added to draft-model rounds and shown on the hardware page."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from inspector.llama_flags import PINNED_SERVER_HELP, capabilities_from_help
from inspector.spec_flags import Setting
from runner.llama import binaries
from runner.models import CostMeasurement
from runner.predict import conditions, prediction, round_cost
from runner.predict.prediction import CostModel, round_residual, step_seconds
from runner.predict.round_cost import RoundRun

COST = CostModel("t.gguf", 256, (0.010, 0.012, 0.014, 0.016, 0.018), sample=0.001, draft_sample=0.0005)


def test_each_round_drafts_k_but_one_remainder_and_the_last_rounds_nothing():
    run = RoundRun(k=4, decode_s=1.0, n_decoded=49, n_drafted=38, n_accept=38, n_encoded=250)
    assert run.rounds == 11
    assert run.drafted_per_round() == [4] * 9 + [2, 0]
    assert sum(run.drafted_per_round()) == run.n_drafted


def test_the_residual_is_what_the_rounds_took_beyond_their_modelled_parts():
    run = RoundRun(k=4, decode_s=0.0, n_decoded=15, n_drafted=12, n_accept=12, n_encoded=250)
    setting = Setting("draft-simple", 4, 0.0)
    # a full round: the target verifies 5 (0.018 + 5 samples), the draft decodes id_last and 3 proposals (4 × 0.010),
    # takes in the target's batch of 5 (0.018) and samples 4 proposals
    one = 0.018 + 5 * 0.001 + 4 * 0.010 + 0.018 + 4 * 0.0005
    assert prediction.modelled_step(setting, 4, COST, COST) == pytest.approx(one)
    # three full rounds of 6 decode calls each, 0.002 s beyond their parts per call
    timed = RoundRun(4, 3 * one + 18 * 0.002, 15, 12, 12, 250)
    assert round_residual(timed, COST, COST) == pytest.approx(0.002)
    assert round_residual(run, COST, COST) == pytest.approx(-one / 6)  # faster than its parts: negative, as measured


def test_only_draft_model_rounds_pay_the_measured_residual_signed():
    draft_setting, ngram = Setting("draft-simple", 4, 0.0), Setting("ngram-mod", 8, None)
    measured = CostModel(**{**COST.__dict__, "extra_per_call_s": 0.001})
    negative = CostModel(**{**COST.__dict__, "extra_per_call_s": -0.001})
    base = step_seconds(draft_setting, 4, COST, COST)
    # a full round of K 4: the target's batch, 4 draft decodes (id_last and 3 proposals), the draft's intake
    assert step_seconds(draft_setting, 4, measured, COST) == pytest.approx(base + 6 * 0.001)
    # a draft p-min stopped after 1 proposal: id_last and that proposal decoded, then the refusal sampled
    short = step_seconds(Setting("draft-simple", 4, 0.75), 1, measured, COST)
    assert short == pytest.approx(step_seconds(Setting("draft-simple", 4, 0.75), 1, COST, COST) + 4 * 0.001)
    assert step_seconds(draft_setting, 4, negative, COST) == pytest.approx(base - 6 * 0.001)  # a saving, as measured
    assert prediction.per_round(0.001) == pytest.approx(0.006)
    assert step_seconds(ngram, 8, measured, None) == pytest.approx(step_seconds(ngram, 8, COST, None))


def test_a_residual_within_the_parts_own_movement_is_measured_and_shown_but_not_priced():
    setting = Setting("draft-simple", 4, 0.0)
    one = prediction.modelled_step(setting, 4, COST, COST)
    # three full rounds that took 10% longer than their parts: measured, shown, below MIN_RESIDUAL_SHARE
    slower = RoundRun(4, 3 * one * 1.1, 15, 12, 12, 250)
    per_call = round_residual(slower, COST, COST)
    assert prediction.residual_share(slower, per_call, COST, COST) == pytest.approx(0.1)
    small = replace(COST, extra_per_call_s=per_call, residual_share=0.1)
    assert not small.residual_used and small.residual_per_call() == 0.0
    assert step_seconds(setting, 4, small, COST) == pytest.approx(step_seconds(setting, 4, COST, COST))
    # rounds that took twice their parts (a GPU's launches): priced, per decode call
    doubled = RoundRun(4, 3 * one * 2, 15, 12, 12, 250)
    per_call = round_residual(doubled, COST, COST)
    assert prediction.residual_share(doubled, per_call, COST, COST) == pytest.approx(1.0)
    big = replace(COST, extra_per_call_s=per_call, residual_share=1.0)
    assert big.residual_used
    assert step_seconds(setting, 4, big, COST) == pytest.approx(2 * one)
    assert prediction.MIN_RESIDUAL_SHARE > 0.1


def test_a_round_run_is_llama_cpps_own_loop_with_the_pair_at_p_min_0_and_the_gpu_layers():
    pinned = capabilities_from_help(Path("llama-speculative-simple"), PINNED_SERVER_HELP.read_text())
    argv = round_cost.round_argv(pinned, "/m/t.gguf", "/m/d.gguf", binaries.GenParams(n_predict=48, gpu_layers=99))
    assert argv[1:5] == ["-m", "/m/t.gguf", "-md", "/m/d.gguf"]
    assert argv[argv.index("-ngl") + 1] == "99" and argv[argv.index("-ngld") + 1] == "99"
    assert argv[argv.index("--spec-type") + 1] == "draft-simple"
    assert argv[argv.index("--spec-draft-n-max") + 1] == str(round_cost.ROUND_K)
    assert argv[argv.index("--spec-draft-p-min") + 1] == "0"


@pytest.mark.django_db
def test_the_hardware_page_shows_each_model_files_residual_per_round(client):
    common = {"model_sha256": "f" * 64, "model_name": "q15.gguf", "model_size": 1, "build": "11434.0.0",
              "hardware_class": "cpu-2c/avx2", "host": "a", "threads": 2}  # fmt: skip
    CostMeasurement.objects.create(key="t", depth=256, data={"depth": 256, "seconds": [0.03, 0.05]}, **common)
    html = client.get("/hardware/cpu-2c/").content.decode()
    assert "Per round beyond the parts" in html and "not measured" in html
    run = RoundRun(4, 1.0, 49, 44, 44, 250).to_dict()
    data = {"round": run, "extra_per_call_s": 0.0007, "calls_per_round": 6, "draft": "q05.gguf"}
    CostMeasurement.objects.create(key="r", depth=250, data=data, **common)
    html = client.get("/hardware/cpu-2c/").content.decode()
    assert "+4.20 ms at K 4 with q05.gguf" in html and "not measured" not in html
    # the round record is no cost model of its own: the plot and table still read the timing row
    assert "q15.gguf, batch 2: 50.0 ms" in html


def rows_conditions() -> list[dict]:
    return [r.data["conditions"] for r in CostMeasurement.objects.all() if "round" in r.data]


@pytest.mark.llama
@pytest.mark.django_db
def test_real_rounds_are_timed_once_per_pair_and_kept_with_their_residual(smollm2_path, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREG_CACHE_DIR", str(tmp_path / "cache"))
    # reuse, whatever the conditions the runs had beside other tests (retaking is test_cost_conditions.py's)
    monkeypatch.setattr(conditions, "quiet_now", lambda window_s=0.5: False)
    gen = binaries.GenParams(n_predict=8, threads=2)
    target = prediction.measure_cost(smollm2_path, gen, round_cost.ROUND_K + 1, reps=3)
    run, extra, cond = round_cost.measure_rounds(
        smollm2_path, smollm2_path, gen, lambda r: round_residual(r, target, target), timeout_s=300
    )
    assert cond is not None and rows_conditions() == [cond.to_dict()]
    assert extra == pytest.approx(round_residual(run, target, target))
    # llama.cpp's own counts: every round yields its accepted tokens and one of the target's
    assert run.rounds == run.n_decoded - run.n_accept > 0
    assert 0 < run.n_drafted <= run.rounds * run.k and run.n_accept <= run.n_drafted
    # p-min 0: every round but the budget's last ones drafted K
    assert run.n_drafted >= (run.rounds - 2) * run.k
    assert run.decode_s > 0 and run.n_encoded > 100  # near the cost model's depth, not at an empty context
    rows = [r for r in CostMeasurement.objects.all() if "round" in r.data]
    assert len(rows) == 1 and rows[0].data["round"] == run.to_dict()
    assert rows[0].data["extra_per_call_s"] == pytest.approx(round_residual(run, target, target))
    assert rows[0].data["calls_per_round"] == round_cost.ROUND_K + 2
    assert len(rows[0].data["decode_s_all"]) == round_cost.ROUND_REPEATS
    assert rows[0].data["draft"] == smollm2_path.name
    # kept: a second prediction of the pair on this machine reads it instead of running llama.cpp again
    # kept with its residual: another moment's cost model does not change what was measured
    again = round_cost.measure_rounds(smollm2_path, smollm2_path, gen, lambda r: 0.0, timeout_s=300)
    assert again[:2] == (run, extra) and CostMeasurement.objects.count() == 2  # the cost model and the rounds


def test_the_residual_takes_the_shape_that_fits_two_k_and_is_priced_by_what_a_round_drafts():
    # full rounds at K 4 and K 8 that grow with their calls (6 and 10 at 1 ms), their drafted tokens, or neither
    per_call = round_cost.fit([(4, 0.006), (8, 0.010)])
    assert per_call is not None and per_call.shape == "per call" and per_call.per_token == pytest.approx(0.001)
    assert per_call.describe() == "+1.00 ms per decode call"
    per_token = round_cost.fit([(4, 0.004), (8, 0.008)])
    assert per_token.shape == "per drafted token" and per_token.per_token == pytest.approx(0.001)
    per_round = round_cost.fit([(4, 0.004), (8, 0.0041)])
    assert per_round.shape == "per round" and per_round.per_round == pytest.approx(0.00405)
    assert round_cost.fit([(4, 0.004)]) is None  # one K: no shape, the residual goes per decode call
    # signed as measured: the parts timed alone overstating a real round is the machine's figure, not noise
    assert round_cost.fit([(4, -0.009), (8, -0.015)]).describe() == "-1.50 ms per decode call"
    # one part, not the line through two noisy points: +13 ms at K 4 and −26 ms at K 8 is no −9.7 ms per token
    noisy = round_cost.fit([(4, 0.0131), (8, -0.0256)])
    assert noisy.shape == "per drafted token" and -0.0026 < noisy.per_token < -0.0012
    t = prediction.CostModel("t", 256, (0.03, 0.05), extra_per_call_s=0.001, residual_fit=(0.002, 0.0005))
    d = prediction.CostModel("d", 256, (0.01, 0.02))
    s = Setting("draft-simple", 8, 0.75)
    # a round that drafted 3 of its 8 (p-min stopped it) pays the round's part and three tokens' parts
    assert prediction.step_extra(s, 3, t, d) == pytest.approx(0.002 + 3 * 0.0005)
    # fitted per call: its decode calls, as without a fit
    calls = replace(t, residual_fit=(0.002, 0.001))
    assert prediction.step_extra(s, 3, calls, d) == pytest.approx(0.001 * prediction.decode_calls(s, 3))
    # without a fit: per decode call (1 + 3 + 1 + 1 calls at 1 ms)
    per_call = replace(t, residual_fit=None)
    assert prediction.step_extra(s, 3, per_call, d) == pytest.approx(0.001 * prediction.decode_calls(s, 3))


def test_a_negative_residual_takes_time_away_but_never_half_a_rounds_parts():
    t = prediction.CostModel("t", 256, (0.03, 0.05, 0.06, 0.07, 0.08), sample=0.001)
    d = prediction.CostModel("d", 256, (0.01, 0.02, 0.025, 0.03, 0.035), draft_sample=0.0005)
    s = Setting("draft-simple", 4, 0.0)
    parts = prediction.modelled_step(s, 4, t, d)
    # −5 ms per round of K 4 beyond its parts: the round costs that much less
    faster = replace(t, extra_per_call_s=-0.005 / 6, residual_fit=(-0.005, 0.0))
    assert prediction.step_seconds(s, 4, faster, d) == pytest.approx(parts - 0.005)
    assert prediction.step_seconds(s, 4, faster, d) < prediction.step_seconds(s, 4, t, d)
    # a line that would take more than half the parts away (a round far shorter than the timed ones) stops there
    steep = replace(t, extra_per_call_s=-1.0, residual_fit=(-1.0, 0.0))
    assert prediction.step_seconds(s, 0, steep, d) == pytest.approx(
        prediction.MIN_PARTS_SHARE * prediction.modelled_step(s, 0, t, d)
    )
    per_call = replace(steep, residual_fit=None)  # per decode call too
    assert prediction.step_seconds(s, 4, per_call, d) == pytest.approx(prediction.MIN_PARTS_SHARE * parts)


@pytest.mark.django_db
def test_the_hardware_page_shows_the_residuals_fit_over_two_k(client):
    common = {"model_sha256": "f" * 64, "model_name": "q15.gguf", "model_size": 1, "build": "11434.0.0",
              "hardware_class": "cpu-2c/avx2", "host": "a", "threads": 2}  # fmt: skip
    CostMeasurement.objects.create(key="t", depth=256, data={"depth": 256, "seconds": [0.03, 0.05]}, **common)
    for key, k, per_call in (("r4", 4, 0.004 / 6), ("r8", 8, 0.008 / 10)):
        run = RoundRun(k, 1.0, 49, 44, 44, 250).to_dict()
        data = {"round": run, "extra_per_call_s": per_call, "calls_per_round": k + 2, "draft": "q05.gguf"}
        CostMeasurement.objects.create(key=key, depth=250, data=data, **common)
    html = client.get("/hardware/cpu-2c/").content.decode()
    assert "fitted over K 4, 8: +1.00 ms per drafted token" in html  # 4 ms at K 4, 8 ms at K 8
