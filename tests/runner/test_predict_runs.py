"""Predictions as runs: the pair page's "Predict" (a queued prediction run, stored as predicted figures) and a
benchmark that predicts every setting first and then measures only the best, with real llama.cpp."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkRun, Pair, PredictedResult
from runner.runs import submit
from runner.runs.execute import execute
from tests.ggufgen import vocab, write_gguf

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.llama
def test_a_prediction_run_stores_every_setting_and_fills_the_predicted_column(transactional_db, settings, smollm2_path):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    f = register_source(str(smollm2_path)).file
    own = pair_for(f, f)
    run = submit.queue_prediction(
        own, methods=["ngram-mod"], content_types=["edit"], n_predict=32, prompts_per_type=1, send=False
    )
    assert run.params["mode"] == "predict" and run.params["target_alone"]
    assert execute(run.pk) == "done"
    run = BenchmarkRun.objects.get(pk=run.pk)
    assert not run.results.exists()  # nothing measured
    rows = list(PredictedResult.objects.filter(run=run))
    assert len(rows) == 6 and {r.method for r in rows} == {"ngram-mod"}  # its six sweep settings
    assert all(r.content_type == "edit" and r.tokens >= 32 and r.hardware_class for r in rows)
    assert any(r.drafted > 0 for r in rows)  # edit prompts repeat their input: n-grams find drafts
    assert run.summary["mode"] == "predict" and set(run.summary["prediction"]["seconds"]) == {
        "transcript",
        "replay",
        "forced",
        "cost_model",
    }
    own = Pair.objects.get(pk=own.pk)
    best = max((r.speedup or 0) for r in rows)
    assert own.predicted_speedup == pytest.approx(best) and own.best_kind == ""  # still nothing measured
    # the machine's cost model, on its hardware page: verify time per batch of 1.. tokens, measured for real
    (cost,) = run.summary["prediction"]["cost_model"].values()
    assert cost["model"] == smollm2_path.name and len(cost["seconds"]) >= 9 and all(x > 0 for x in cost["seconds"])
    html = Client().get(f"/hardware/{run.hardware_class}/").content.decode()
    assert "<svg" in html and smollm2_path.name in html  # recorded even where this worker had its own copy
    transcripts = html.split('id="transcript-table"')[1]
    assert smollm2_path.name in transcripts and '<td class="num">1</td>' in transcripts  # one edit prompt
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert 'id="predictions"' in page and "ngram-mod K=" in page


@pytest.mark.llama
@pytest.mark.django_db(transaction=True)
def test_run_benchmark_predicts_every_setting_then_measures_the_best_two(smollm2_path):
    out = StringIO()
    m = str(smollm2_path)
    call_command(
        "run_benchmark", m, m, "--methods", "draft-simple", "--k", "1,2,4", "--no-extend", "--p-min", "0",
        "--tasks", "json", "--here", "--repeats", "1", "--n-predict", "32", "--prompts-per-type", "1", stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    run = BenchmarkRun.objects.get()
    assert run.status == "done", run.error
    predicted = {r.k: r for r in run.predictions.all()}
    assert sorted(predicted) == [1, 2, 4]
    measured = list(run.results.all())
    best_two = sorted(predicted, key=lambda k: -(predicted[k].speedup or 0))[:2]
    assert sorted(r.k for r in measured) == sorted(best_two)
    assert "predicted 3 setting(s) first" in text
    for r in measured:  # each measured row carries its prediction and the error against it
        line = next(x for x in text.splitlines() if x.startswith("json ") and f"K={r.k} " in x)
        assert f"{predicted[r.k].speedup:.2f}x (" in line
    assert "## Predicted first" in run.report_md and run.summary["prediction"]["measured"]["json"]


@pytest.mark.llama
@pytest.mark.django_db(transaction=True)
def test_full_sweep_measures_every_setting_and_predicts_nothing(smollm2_path):
    m = str(smollm2_path)
    call_command(
        "run_benchmark", m, m, "--methods", "draft-simple", "--k", "1,2,4", "--no-extend", "--p-min", "0",
        "--tasks", "json", "--here", "--repeats", "1", "--n-predict", "24", "--prompts-per-type", "1",
        "--full-sweep", stdout=StringIO(),
    )  # fmt: skip
    run = BenchmarkRun.objects.get()
    assert sorted(r.k for r in run.results.all()) == [1, 2, 4] and not run.predictions.exists()
    assert "prediction" not in run.summary


@pytest.mark.llama
@pytest.mark.django_db(transaction=True)
def test_a_pinned_setting_is_measured_without_predicting_first(smollm2_path):
    # a predicted sweep measures its best two settings anyway: with one or two, predicting would only cost its time
    m = str(smollm2_path)
    call_command(
        "run_benchmark", m, m, "--methods", "draft-simple", "--k", "4", "--no-extend", "--p-min", "0",
        "--tasks", "json", "--here", "--repeats", "1", "--n-predict", "24", "--prompts-per-type", "1",
        stdout=StringIO(),
    )  # fmt: skip
    run = BenchmarkRun.objects.get()
    assert [r.k for r in run.results.all()] == [4] and not run.predictions.exists()
    assert "prediction" not in run.summary


def test_a_model_too_big_for_this_machine_is_refused_in_one_line(tmp_path):
    big = write_gguf(tmp_path / "big.gguf", tokens=vocab(300))
    with open("/proc/meminfo") as f:
        mem = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    os.truncate(big, 2 * mem)  # a sparse file: its size, not its bytes, is what llama.cpp would have to map
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["SPECREG_DATA_DIR"] = str(tmp_path / "data")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    r = subprocess.run(
        [sys.executable, "manage.py", "predict", str(big), "--methods", "ngram-mod"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert "GiB of weights" in line and "GiB of memory" in line
