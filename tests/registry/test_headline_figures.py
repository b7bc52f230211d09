"""A figure is headlined (table, model page, API "best", pair page, recommended command) only when the measurement can
tell its gain from noise; anything else reads as what it is: one rule (registry.results.standing) for the runner and
the registry."""

from __future__ import annotations

import pytest
from django.test import Client

from registry.models import BenchmarkResult, BenchmarkRun, Pair
from registry.results.figures import refresh_best
from registry.results.standing import standing
from runner.management.commands.run_benchmark import format_results
from runner.measure.cells import Spread
from runner.sweep.sweep import measurable_gain
from tests.runs import cell_result


def _measured(pair: Pair, **figures) -> BenchmarkResult:
    run = BenchmarkRun.objects.create(
        pair=pair,
        queue="bench.x",
        status=BenchmarkRun.DONE,
        summary={
            "recommendations": [
                {
                    "content_type": "code",
                    "temperature": 0.0,
                    "k": None,
                    "speedup": 2.13,
                    "reason": "no measurable gain: K=4 measured 2.13x, within its spread (1 interleaved pair from "
                    "2.13x to 2.13x); more repeats would tell",
                    "caveat": None,
                }
            ]
        },
    )
    values = dict(
        k=4, method="draft-simple", content_type="code", speedup=2.13, acceptance=0.9, tokens_per_second=60.0,
        baseline_tokens_per_second=28.2, n_predict=64, repeats=1, n_prompts=1, status="ok",
        speedup_min=2.13, speedup_max=2.13, pairs=1,
    )  # fmt: skip
    values.update(figures)
    result = BenchmarkResult.objects.create(run=run, pair=pair, **values)
    refresh_best(pair)
    return result


def test_the_rule():
    assert standing(2.13, 2.13, 2.13, 1) == "1 repeat"
    assert standing(1.4, 1.2, 1.6, 3, other_cpu_share=0.58) == "contended"
    assert standing(1.05, 0.92, 1.1, 4) == "no measurable gain"
    assert standing(1.3, 1.12, 1.5, 4, other_cpu_share=0.02) == ""
    assert standing(1.3) == ""  # measured before the pairs' range was kept: as it is


@pytest.mark.django_db
def test_a_one_repeat_gain_is_not_the_tables_headline(pair: Pair):
    _measured(pair)
    pair.refresh_from_db()
    assert pair.best_speedup is None and pair.best_note == "no measurable gain: 2.13× in 1 repeat"
    html = Client().get("/?verdict=all").content.decode()
    assert "no measurable gain: 2.13× in 1 repeat" in html
    assert '<span class="win">2.13×</span>' not in html
    best = Client().get("/api/pairs").json()["results"][0]["best"]
    assert best["speedup"] is None and best["note"].startswith("no measurable gain") and best["kind"] == "measured"


@pytest.mark.django_db
def test_the_pair_page_says_why_and_its_command_agrees(pair: Pair):
    _measured(pair)
    rec = Client().get(f"/api/pairs/{pair.pk}").json()["recommendation"]
    assert rec["use_draft"] is False
    assert rec["basis"].startswith(
        "No measurable gain: the best measured result, K=4 at 2.13×, was measured in 1 repeat"
    )
    assert "Best measured result" not in rec["basis"] and "-md" not in rec["command"]
    html = Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert "Best measured result" not in html and "no measurable gain: 2.13× in 1 repeat" in html


@pytest.mark.django_db
def test_a_contended_gain_is_not_headlined(pair: Pair):
    _measured(pair, repeats=3, pairs=3, speedup_min=1.9, speedup_max=2.3, other_cpu_share=0.58)
    pair.refresh_from_db()
    assert pair.best_speedup is None and pair.best_note.startswith("contended: 2.13×")
    rec = Client().get(f"/api/pairs/{pair.pk}").json()["recommendation"]
    assert rec["use_draft"] is False and "other work took 58% of the CPU" in rec["basis"]
    model_page = Client().get(pair.target.get_absolute_url()).content.decode()
    assert "contended: 2.13×" in model_page


@pytest.mark.django_db
def test_a_measurable_gain_still_headlines_over_an_unmeasurable_faster_one(pair: Pair):
    _measured(pair)  # 2.13x in 1 repeat
    _measured(pair, k=8, speedup=1.4, speedup_min=1.2, speedup_max=1.6, pairs=3, repeats=3)
    pair.refresh_from_db()
    assert pair.best_speedup == pytest.approx(1.4) and pair.best_k == 8 and pair.best_note == ""


@pytest.mark.django_db
def test_the_cli_prints_why_it_recommends_what_it_does(pair: Pair):
    r = _measured(pair)
    out = format_results(r.run)
    assert "recommended for code at temperature 0.0: run without speculation because no measurable gain" in out


def test_the_runner_counts_one_repeat_as_the_registry_does():
    one = cell_result(4, 2.13, pairs=Spread(2.13, 2.13, 2.13, 1))
    three = cell_result(4, 1.4)
    assert not measurable_gain(one) and standing(2.13, 2.13, 2.13, 1) != ""
    assert measurable_gain(three) and standing(1.4, 1.35, 1.45, 3) == ""
