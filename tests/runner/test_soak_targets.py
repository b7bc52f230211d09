"""What a soak runs (a pair's best measured setting, a deployment's), the buttons that queue one, and the
recommendation that names the concurrency and the -np it was measured with; no llama.cpp needed."""

from __future__ import annotations

import shlex

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from registry.models import BenchmarkResult, BenchmarkRun, StabilityResult
from registry.team.models import Deployment
from runner.errors import BenchmarkError
from runner.runs.submit import queue_soak
from tests.runs import measured

pytestmark = [pytest.mark.django_db]


def test_a_pair_soaks_its_best_measured_setting_with_its_slots(pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody."
    measured(pair, 4, 1.1)
    best = measured(pair, 2, 1.4, clients=2)
    run = queue_soak(str(pair.pk), duration_s=120, clients=1, send=False)
    s = run.params["soak"]
    assert (s["method"], s["k"], s["parallel"], s["clients"]) == ("draft-simple", 2, 2, 1)
    assert run.params["mode"] == "soak" and f"run {best.run_id}" in s["basis"]
    assert run.target_file_id == pair.target_id and run.draft_file_id == pair.draft_id
    with pytest.raises(BenchmarkError, match="at most 24 h"):
        queue_soak(str(pair.pk), duration_s=25 * 3600, send=False)


def test_a_deployment_soaks_its_own_setting(pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody."
    dep = Deployment.objects.create(
        target=pair.target, draft=pair.draft, pair=pair, method="draft-simple", k=6, command="llama-server …",
        author_name="alice", deployed_at=timezone.now(),
    )  # fmt: skip
    run = queue_soak(f"deployment:{dep.pk}", duration_s=600, clients=2, send=False)
    s = run.params["soak"]
    assert (s["method"], s["k"], s["deployment"], s["parallel"]) == ("draft-simple", 6, dep.pk, 2)
    # its record shows on the deployment page, and a signed-in user gets the button
    StabilityResult.objects.create(
        run=run, pair=pair, deployment_ref=dep.pk, k=6, method="draft-simple", clients=2, parallel=2, planned_s=600,
        status="stable", verdict="stable for 10 min at 2 clients: 0 errors, memory +1%",
        intervals=[{"t": 60.0, "requests": 9, "tokens_per_second": 40.0, "acceptance": 0.8, "errors": 0}],
    )  # fmt: skip
    alice = User.objects.create_user("alice", password="pw-alice-123456")
    c = Client()
    c.force_login(alice)
    page = c.get(f"/deployments/{dep.pk}/").content.decode()
    assert 'id="stability"' in page and "stable for 10 min at 2 clients" in page and 'id="soak-button"' in page
    assert "<svg" in page
    r = c.post(f"/deployments/{dep.pk}/soak", {"duration": "1h", "clients": "1"})
    assert r.status_code == 302 and BenchmarkRun.objects.filter(params__mode="soak").count() == 2


def test_the_soak_button_and_api_refuse_bad_input_in_one_line(pair):
    alice = User.objects.create_user("alice", password="pw-alice-123456")
    c = Client()
    assert c.post(f"/pairs/{pair.pk}/soak").status_code == 302  # to the login page: nothing queued
    c.force_login(alice)
    r = c.post(f"/api/pairs/{pair.pk}/soak", {"duration": "10m"}, content_type="application/json")
    assert r.status_code == 400 and "has no measured setting faster than the target alone" in r.json()["error"]
    measured(pair, 4, 1.2)
    r = c.post(f"/api/pairs/{pair.pk}/soak", {"duration": "0s"}, content_type="application/json")
    assert r.status_code == 400 and r.json()["error"].startswith("a soak lasts more than 0 s")
    r = c.post(f"/api/pairs/{pair.pk}/soak", {"duration": "10m", "clients": 2}, content_type="application/json")
    assert r.status_code == 202 and r.json()["run"]
    assert c.post("/api/pairs/99999/soak", {}, content_type="application/json").status_code == 404
    page = c.post(f"/pairs/{pair.pk}/soak", {"duration": "forever"}, follow=True).content.decode()
    assert "duration &#x27;forever&#x27; is not one" in page or "duration 'forever' is not one" in page


def test_the_recommendation_names_the_concurrency_and_its_slots(pair):
    measured(pair, 2, 1.5, clients=4)
    page = Client().get(pair.get_absolute_url()).content.decode()
    assert "at 4 concurrent clients" in page
    api = Client().get(f"/api/pairs/{pair.pk}").json()
    argv = shlex.split(api["recommendation"]["command"])
    assert argv[argv.index("-np") + 1] == "4" and argv[argv.index("--spec-draft-n-max") + 1] == "2"


def test_long_soaks_are_for_staff(pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody."
    measured(pair, 4, 1.2)
    bob = User.objects.create_user("bob", password="pw-bob-123456")
    with pytest.raises(BenchmarkError, match="more than 8 h holds the benchmark worker too long"):
        queue_soak(str(pair.pk), duration_s=9 * 3600, user=bob, send=False)
    sam = User.objects.create_user("sam", password="pw-sam-123456", is_staff=True)
    assert queue_soak(str(pair.pk), duration_s=9 * 3600, user=sam, send=False).params["soak"]["duration_s"] == 9 * 3600


def test_a_soak_takes_the_gain_the_pair_page_recommends_not_one_within_its_spread(pair, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody."
    noisy = measured(pair, 8, 1.5)
    BenchmarkResult.objects.filter(pk=noisy.pk).update(speedup_min=0.9, speedup_max=2.0, pairs=3)
    measured(pair, 4, 1.2)  # kept before the spread was: counts as it is
    s = queue_soak(str(pair.pk), duration_s=120, send=False).params["soak"]
    assert s["k"] == 4
    rec = Client().get(f"/api/pairs/{pair.pk}").json()["recommendation"]
    assert rec["k"] == 4
