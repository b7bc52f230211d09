"""Queueing, following and cancelling benchmarks from the browser's side (no worker needed)."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from registry.pairing import pair_for
from registry.models import BenchmarkRun
from registry.sources import register_source

pytestmark = pytest.mark.db_service  # CI runs these again on PostgreSQL


@pytest.fixture
def pair(db, smollm2_path):
    f = register_source(str(smollm2_path)).file
    return pair_for(f, f)


@pytest.fixture
def user_client(client, db):
    client.force_login(User.objects.create_user("ann", password="x" * 12))
    return client


def test_queueing_needs_a_login(client, pair):
    r = client.post(f"/pairs/{pair.pk}/benchmark", {"ks": "4", "temperatures": "0", "repeats": 1, "n_predict": 32,
                                                   "prompts_per_type": 1})
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    assert not BenchmarkRun.objects.exists()


def test_a_logged_in_user_queues_a_run_and_follows_it(user_client, pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    r = user_client.post(f"/pairs/{pair.pk}/benchmark", {"ks": "4,8", "temperatures": "0,0.7", "repeats": 2,
                                                        "n_predict": 64, "prompts_per_type": 1,
                                                        "content_types": ["code", "math"], "hardware": "gpu-x"})
    run = BenchmarkRun.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/runs/{run.pk}/"
    assert run.params["ks"] == [4, 8] and run.params["temperatures"] == [0.0, 0.7]
    assert run.params["content_types"] == ["code", "math"] and run.queue == "nobody-listens.bench.gpu-x"
    page = user_client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200 and b"run-progress" in page.content and b"run.js" in page.content
    state = user_client.get(f"/api/runs/{run.pk}").json()
    assert state["status"] == "queued" and state["finished"] is False
    assert user_client.post(f"/runs/{run.pk}/cancel").status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert user_client.get(f"/runs/{run.pk}/report").status_code == 404


def test_bad_benchmark_settings_are_refused_with_a_message(user_client, pair):
    r = user_client.post(f"/pairs/{pair.pk}/benchmark", {"ks": "4,x", "temperatures": "0", "repeats": 1,
                                                        "n_predict": 32, "prompts_per_type": 1}, follow=True)
    assert b"comma-separated numbers" in r.content and not BenchmarkRun.objects.exists()
    r = user_client.post(f"/pairs/{pair.pk}/benchmark", {"ks": "100", "temperatures": "0", "repeats": 1,
                                                        "n_predict": 32, "prompts_per_type": 1}, follow=True)
    assert b"K must be between 1 and 64" in r.content and not BenchmarkRun.objects.exists()


def test_incompatible_pairs_cannot_be_queued(user_client, db, smollm2_path, qwen05_header_path):
    p = pair_for(register_source(str(qwen05_header_path)).file, register_source(str(smollm2_path)).file)
    r = user_client.post(f"/pairs/{p.pk}/benchmark", {"ks": "4", "temperatures": "0", "repeats": 1,
                                                     "n_predict": 32, "prompts_per_type": 1}, follow=True)
    assert b"cannot draft for" in r.content and b"vocab_size" in r.content
    assert not BenchmarkRun.objects.exists()
