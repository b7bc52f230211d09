"""Queueing, following and cancelling benchmarks from the browser's side (no worker needed)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkRun
from runner.runs import records as runs
from runner.runs import submit

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
    r = client.post(
        f"/pairs/{pair.pk}/benchmark",
        {"ks": "4", "temperatures": "0", "repeats": 1, "n_predict": 32, "prompts_per_type": 1},
    )
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    assert not BenchmarkRun.objects.exists()


def test_a_logged_in_user_queues_a_run_and_follows_it(user_client, pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    r = user_client.post(
        f"/pairs/{pair.pk}/benchmark",
        {
            "ks": "4,8",
            "temperatures": "0,0.7",
            "repeats": 2,
            "n_predict": 64,
            "prompts_per_type": 1,
            "content_types": ["code", "math"],
            "hardware": "gpu-x",
        },
    )
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
    r = user_client.post(
        f"/pairs/{pair.pk}/benchmark",
        {"ks": "4,x", "temperatures": "0", "repeats": 1, "n_predict": 32, "prompts_per_type": 1},
        follow=True,
    )
    assert b"comma-separated numbers" in r.content and not BenchmarkRun.objects.exists()
    r = user_client.post(
        f"/pairs/{pair.pk}/benchmark",
        {"ks": "100", "temperatures": "0", "repeats": 1, "n_predict": 32, "prompts_per_type": 1},
        follow=True,
    )
    assert b"K must be between 1 and 64" in r.content and not BenchmarkRun.objects.exists()


def test_incompatible_pairs_cannot_be_queued(user_client, db, smollm2_path, qwen05_header_path):
    p = pair_for(register_source(str(qwen05_header_path)).file, register_source(str(smollm2_path)).file)
    r = user_client.post(
        f"/pairs/{p.pk}/benchmark",
        {"ks": "4", "temperatures": "0", "repeats": 1, "n_predict": 32, "prompts_per_type": 1},
        follow=True,
    )
    assert b"cannot draft for" in r.content and b"vocab_size" in r.content
    assert not BenchmarkRun.objects.exists()


def _form(**extra) -> dict:
    return {"ks": "4", "temperatures": "0", "repeats": 1, "n_predict": 32, "prompts_per_type": 1, **extra}


def test_only_the_user_who_queued_a_run_or_staff_may_cancel_it(user_client, client, pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    user_client.post(f"/pairs/{pair.pk}/benchmark", _form())
    run = BenchmarkRun.objects.get()
    client.force_login(User.objects.create_user("mallory", password="x" * 12))
    assert client.post(f"/runs/{run.pk}/cancel").status_code == 403
    assert b'id="cancel"' not in client.get(f"/runs/{run.pk}/").content
    run.refresh_from_db()
    assert run.status == "queued"
    client.force_login(User.objects.create_user("staff", password="x" * 12, is_staff=True))
    assert client.post(f"/runs/{run.pk}/cancel").status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_a_user_may_have_only_a_few_runs_queued(user_client, pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    settings.SPECREG_MAX_ACTIVE_RUNS_PER_USER = 2
    for _ in range(2):
        assert user_client.post(f"/pairs/{pair.pk}/benchmark", _form()).status_code == 302
    r = user_client.post(f"/pairs/{pair.pk}/benchmark", _form())
    assert r.status_code == 400 and b"2 benchmark(s) queued or running" in r.content
    assert BenchmarkRun.objects.count() == 2


def test_a_benchmark_far_beyond_the_defaults_is_refused_but_the_default_is_admitted(user_client, pair):
    huge = _form(
        ks=",".join(str(k) for k in range(1, 65)), temperatures="0,0.5,1,1.5,2", repeats=20, prompts_per_type=50
    )
    r = user_client.post(f"/pairs/{pair.pk}/benchmark", huge)
    assert r.status_code == 400 and b"llama.cpp processes, more than the 4,000 allowed" in r.content
    default = {"ks": "4,8,16", "temperatures": "0", "repeats": 3, "n_predict": 128, "prompts_per_type": 3}
    assert user_client.post(f"/pairs/{pair.pk}/benchmark", default).status_code == 302


@pytest.mark.parametrize("hardware", ["a/b", "../../etc", "UPPER", "x" * 80])
def test_a_hardware_class_that_is_not_a_class_name_is_refused_and_stores_nothing(user_client, pair, hardware):
    r = user_client.post(f"/pairs/{pair.pk}/benchmark", _form(hardware=hardware))
    assert r.status_code == 400 and b"is not valid" in r.content and not BenchmarkRun.objects.exists()


def test_the_sweep_fails_runs_no_worker_took(user_client, pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    user_client.post(f"/pairs/{pair.pk}/benchmark", _form(hardware="gpu-nonexistent"))
    assert runs.sweep_stale(queued_for_s=3600) == 0  # not old yet
    assert runs.sweep_stale(queued_for_s=0) == 1
    run = BenchmarkRun.objects.get()
    assert run.status == "failed" and "no worker listened on queue nobody-listens.bench.gpu-nonexistent" in run.error


@pytest.mark.django_db(transaction=True)
def test_runs_queued_at_once_cannot_all_pass_the_per_user_limit(pair, settings):
    import threading

    from django.db import connection

    settings.SPECREG_MAX_ACTIVE_RUNS_PER_USER = 2
    user = User.objects.create_user("racer", password="x" * 12)
    barrier, outcomes = threading.Barrier(10), []

    def queue() -> None:
        barrier.wait()
        try:
            submit.queue_benchmark(pair, {}, user=user, send=False, hardware="cpu-race")
            outcomes.append("queued")
        except runs.BenchmarkError as exc:
            outcomes.append(str(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=queue) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("queued") == 2, outcomes
    assert BenchmarkRun.objects.filter(requested_by=user).count() == 2
