"""A gain counts only beyond its measured spread: each interleaved pair's speedup is kept with a result,
and a recommendation (the sweep's, the pair page's) needs every pair faster; no llama.cpp needed."""

from __future__ import annotations

import pytest
from django.test import Client

from registry.models import BenchmarkResult, BenchmarkRun, Pair
from runner.measure.cells import Cell, Run, summarize


def test_each_speculative_run_is_set_against_the_plain_run_beside_it():
    runs = [
        Run("plain", 0, 0, "ok", 1.0, 1.0, 100.0, 64),
        Run("spec", 0, 0, "ok", 1.0, 1.0, 110.0, 64, 40, 30),
        Run("plain", 1, 0, "ok", 1.0, 1.0, 50.0, 64),
        Run("spec", 1, 0, "ok", 1.0, 1.0, 45.0, 64, 40, 20),
    ]
    res = summarize(Cell("t", "d", 4, ("a", "b"), repeats=1), runs, "ok", None, 4.0)
    p = res.pair_speedups
    assert p is not None and p.n == 2 and p.min == pytest.approx(0.9) and p.max == pytest.approx(1.1)
    # the medians alone say 1.03x (77.5 over 75): the pairs say one prompt gained and the other lost
    assert res.speedup == pytest.approx(77.5 / 75)


@pytest.mark.django_db
def test_the_pair_page_recommends_no_draft_for_a_gain_within_its_spread(pair: Pair):
    run = BenchmarkRun.objects.create(pair=pair, queue="bench.x", status=BenchmarkRun.DONE)
    BenchmarkResult.objects.create(
        run=run, pair=pair, k=4, method="ngram-mod", content_type="prose", speedup=1.01, acceptance=0.4,
        tokens_per_second=30.3, baseline_tokens_per_second=30.0, n_predict=64, repeats=2, n_prompts=2, status="ok",
        speedup_min=0.92, speedup_max=1.06, pairs=4,
    )  # fmt: skip
    api = Client().get(f"/api/pairs/{pair.pk}").json()
    rec = api["recommendation"]
    assert rec["use_draft"] is False and rec["basis"].startswith("No measurable gain: the best measured result, K=4")
    assert "0.92–1.06× over 4 interleaved pairs" in rec["basis"] and "--spec" not in rec["command"]
    assert api["measured"][0]["pair_speedups"] == {"min": 0.92, "max": 1.06, "pairs": 4}
    BenchmarkResult.objects.filter(run=run).update(speedup=1.3, speedup_min=1.12)
    rec = Client().get(f"/api/pairs/{pair.pk}").json()["recommendation"]
    assert rec["use_draft"] is True and rec["k"] == 4
