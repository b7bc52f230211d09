"""Predicted figures, the fourth kind: stored apart, shown apart (table column and sort, pair page beside the
measurement with its error, model page, API, CSV), never mixed into the measured or reported best."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import User
from django.test import Client

from registry.catalog.pairing import pair_for
from registry.catalog.registration import register
from registry.models import BenchmarkResult, BenchmarkRun, Pair
from registry.results.figures import refresh_best
from runner.models import CostMeasurement, KeptTranscript
from tests.runs import predict_run

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


@pytest.fixture
def pairs(infos):
    files = {
        k: register(infos[k], source=f"hf://org/{k}/{k}.gguf", repo=f"org/{k}", path=f"{k}.gguf", size=1).file
        for k in ("qwen05", "qwen15", "smollm2")
    }
    qwen = Pair.objects.get(target=files["qwen15"], draft=files["qwen05"])
    own = pair_for(files["smollm2"], files["smollm2"])  # the target alone: n-gram methods
    return qwen, own


def measure(pair: Pair, k: int, acc: float, speed: float, *, identical: bool = True) -> None:
    run = BenchmarkRun.objects.create(pair=pair, queue="bench.cpu-2c", status="done")
    BenchmarkResult.objects.create(
        run=run,
        pair=pair,
        k=k,
        p_min=0.0,
        content_type="code",
        acceptance=acc,
        speedup=speed,
        n_predict=128,
        repeats=3,
        n_prompts=2,
        status="ok",
        identical=identical,
        hardware="Some CPU (cpu-2c/avx2)",
        llama_cpp_build="b11434",
    )
    refresh_best(pair)


def test_predictions_fill_their_own_column_never_the_measured_best(client, pairs):
    qwen, own = pairs
    predict_run(qwen, [("draft-simple", 2, 0.0, 0.8, 1.3), ("draft-simple", 4, 0.0, 0.75, 1.1)])
    predict_run(own, [("ngram-mod", 16, None, 0.5, 2.0)])
    measure(qwen, 4, 0.70, 1.0)
    qwen.refresh_from_db()
    assert (qwen.best_kind, qwen.best_k, qwen.best_speedup) == ("measured", 4, 1.0)
    assert (qwen.predicted_speedup, qwen.predicted_k, qwen.predicted_method) == (1.3, 2, "draft-simple")

    html = client.get("/?verdict=all&sort=-predicted").content.decode()
    assert "Predicted" in html and 'badge predicted">predicted' in html
    assert html.index("2.00×") < html.index("1.30×")  # the own pair's n-gram prediction first
    asc = client.get("/?verdict=all&sort=predicted").content.decode()
    assert asc.index("1.30×") < asc.index("2.00×")

    rows = {r["id"]: r for r in client.get("/api/pairs?verdict=all").json()["results"]}
    assert rows[qwen.pk]["best"]["kind"] == "measured"
    assert rows[qwen.pk]["predicted"] == {
        "kind": "predicted",
        "k": 2,
        "speedup": 1.3,
        "content_type": "code",
        "method": "draft-simple",
    }
    got = list(csv.DictReader(io.StringIO(b"".join(client.get("/pairs.csv?verdict=all").streaming_content).decode())))
    by_k = {r["predicted_k"]: r for r in got if r["predicted_k"]}
    assert by_k["2"]["predicted_speedup"] == "1.300" and by_k["2"]["result_kind"] == "measured"


def test_the_pair_page_sets_each_prediction_beside_its_measurement_with_the_error(client, pairs):
    qwen, _ = pairs
    predict_run(qwen, [("draft-simple", 2, 0.0, 0.8, 1.3), ("draft-simple", 4, 0.0, 0.75, 1.1)])
    measure(qwen, 4, 0.70, 1.0)
    data = client.get(f"/api/pairs/{qwen.pk}").json()
    by_k = {p["k"]: p for p in data["predicted"]}
    assert by_k[4]["measured"] == {"acceptance": 0.70, "speedup": 1.0, "texts_parted": False}
    assert by_k[4]["speedup_error_pct"] == pytest.approx(10.0)
    assert by_k[4]["acceptance_error_points"] == pytest.approx(5.0)
    assert by_k[2]["measured"] is None and by_k[2]["speedup_error_pct"] is None
    assert (by_k[2]["hardware_class"], by_k[2]["task_set"], by_k[2]["near_ties"]) == ("cpu-2c/avx2", "default", 2)
    assert [f["kind"] for f in data["measured"]] == ["measured"]  # never mixed
    html = client.get(qwen.get_absolute_url()).content.decode()
    assert 'id="predicted-table"' in html and "not measured" in html
    assert "Against 1 measured setting: acceptance off by 5.0 points" in html


def test_a_measurement_whose_texts_parted_is_shown_but_left_out_of_the_errors(client, pairs):
    qwen, _ = pairs
    predict_run(qwen, [("draft-simple", 4, 0.0, 0.75, 1.1)])
    measure(qwen, 4, 0.40, 0.6, identical=False)
    data = client.get(f"/api/pairs/{qwen.pk}").json()
    assert data["predicted"][0]["measured"]["texts_parted"] is True
    html = client.get(qwen.get_absolute_url()).content.decode()
    assert "texts parted" in html and 'id="prediction-errors"' not in html


def test_a_newer_prediction_replaces_the_older_one_on_the_same_hardware_only(client, pairs):
    qwen, _ = pairs
    predict_run(qwen, [("draft-simple", 2, 0.0, 0.8, 1.3)])
    predict_run(qwen, [("draft-simple", 8, 0.0, 0.6, 0.9)])  # again, say under a newer build
    qwen.refresh_from_db()
    assert (qwen.predicted_k, qwen.predicted_speedup) == (8, 0.9)
    predict_run(qwen, [("draft-simple", 4, 0.0, 0.9, 3.0)], hw="gpu-nvidia-h100")  # another machine: both stand
    ks = sorted(p["k"] for p in client.get(f"/api/pairs/{qwen.pk}").json()["predicted"])
    assert ks == [4, 8]


def test_the_model_page_ranks_ways_measured_then_predicted_then_reported(client, pairs):
    qwen, _ = pairs
    predict_run(qwen, [("draft-simple", 2, 0.0, 0.8, 1.3)])
    html = client.get(f"/models/{qwen.target.model_id}/").content.decode()
    ways = html[html.index('id="ways"') :]
    assert '<span class="badge predicted">predicted</span>' in ways and "1.30" in ways


def test_predict_needs_a_signed_in_user_and_queues_a_prediction_run(client, pairs, settings):
    qwen, own = pairs
    assert client.post(f"/pairs/{qwen.pk}/predict").status_code == 302  # to the login page
    assert client.post(f"/api/pairs/{qwen.pk}/predict", {}, content_type="application/json").status_code in (401, 403)
    assert not BenchmarkRun.objects.exists()
    alice = User.objects.create_user("alice", password="x" * 12)
    c = Client()
    c.force_login(alice)
    r = c.post(f"/pairs/{qwen.pk}/predict")
    run = BenchmarkRun.objects.get()
    assert r.status_code == 302 and r["Location"] == run.get_absolute_url()
    assert run.params["mode"] == "predict" and run.requested_by == alice and run.status == "queued"
    assert run.params["methods"][0] == "draft-simple" and "ngram-mod" in run.params["methods"]
    api = c.post(f"/api/pairs/{own.pk}/predict", {"ks": [2, 4], "n_predict": 64}, content_type="application/json")
    assert api.status_code == 202, api.content
    body = api.json()
    own_run = BenchmarkRun.objects.get(pk=body["run"])
    assert body["api"] == f"/api/runs/{own_run.pk}" and own_run.params["target_alone"] is True
    assert "draft-simple" not in own_run.params["methods"] and own_run.params["ks"] == [2, 4]
    assert body["transcripts"].startswith("No transcript of smollm2.gguf is kept for cpu-")
    KeptTranscript.objects.create(
        key="t1", model_sha256="0" * 64, model_name="smollm2.gguf", model_size=1, build="11434.0.0",
        hardware_class=f"{own_run.hardware_class}/avx512", task="default/code/c1", n_predict=100, data={},
    )  # fmt: skip
    again = c.post(f"/api/pairs/{own.pk}/predict", {}, content_type="application/json").json()
    assert again["transcripts"].startswith(f"1 transcript of smollm2.gguf kept for {own_run.hardware_class}")
    bad = c.post(f"/api/pairs/{own.pk}/predict", {"ks": [0]}, content_type="application/json")
    assert bad.status_code == 400 and "ks" in bad.json()["error"]
    page = c.get(f"/runs/{run.pk}/").content.decode()
    assert "Prediction #" in page


def test_the_hardware_page_plots_the_newest_cost_model_per_model_file_and_machine(client, pairs):
    qwen, _ = pairs
    BenchmarkRun.objects.create(pair=qwen, queue="bench.cpu-2c", hardware_class="cpu-2c", status="done")
    for n, (host, secs) in enumerate([("a", [0.030, 0.050, 0.070]), ("a", [0.040, 0.060, 0.080]), ("b", [0.1, 0.2])]):
        CostMeasurement.objects.create(
            key=f"k{n}", model_sha256="f" * 64, model_name="q15.gguf", model_size=1, build="11434.0.0",
            hardware_class="cpu-2c/avx2", host=host, threads=2, depth=256,
            data={"depth": 256, "seconds": secs, "sample_s": 0.00013},
        )  # fmt: skip
    html = client.get("/hardware/cpu-2c/").content.decode()
    # Anonymous visitors see each machine by a number of its own (host names are the installation's).
    assert "<svg" in html and "q15.gguf on machine 1, batch 3: 80.0 ms" in html  # machine a's newer figures
    assert "batch 3: 70.0 ms" not in html and "q15.gguf on machine 2, batch 2: 200.0 ms" in html  # each its own
    assert "avx2" in html and "130 µs" in html
    KeptTranscript.objects.create(
        key="t1", model_sha256="f" * 64, model_name="q15.gguf", model_size=1, build="11434.0.0",
        hardware_class="cpu-2c/avx2", task="default/code/c1", n_predict=100, data={},
    )  # fmt: skip
    table = client.get("/hardware/cpu-2c/").content.decode().split('id="transcript-table"')[1]
    assert "q15.gguf" in table and '<td class="num">1</td>' in table
    assert client.get("/hardware/cpu-8c/").status_code == 404  # nothing measured there
    assert client.get("/hardware/gpu-nobody/").status_code == 404
    assert client.get("/hardware/..%2Fetc/").status_code == 404
