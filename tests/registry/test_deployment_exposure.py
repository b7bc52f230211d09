"""What a deployment or a soak lets reach llama-server's argv, and what an anonymous visitor sees of them: a deployment
follows only a run of its own models, a soak keeps the benchmark's bounds, worker host names, typed commands and
binary folders reach only those who may see paths. Each test reproduces an attack, scaled to stay fast; the
deployment page says when a queued scrape is running.
"""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from registry.models import BenchmarkResult, BenchmarkRun, GGUFFile
from registry.team import deployments as deps
from registry.team.deployments import DeploymentSpec, record
from registry.team.models import Deployment
from runner.errors import BenchmarkError
from runner.models import CostMeasurement
from runner.soak.targets import soak_target
from tests.real_files import pair_of
from tests.registering import SMOL, reg
from tests.runs import CMD, recommending_run

correct = importlib.import_module("registry.team.migrations.0004_deployments_on_their_own_pairs").correct

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def team_pair(pair):
    return pair


def smol(pair_):
    return GGUFFile.objects.get(repo=SMOL)


def test_a_deployment_follows_only_a_run_of_its_own_models(team_pair):
    run = recommending_run(team_pair)  # a run of the Qwen pair
    spec = deps.DeploymentSpec(
        target=smol(team_pair), draft=None, method="ngram-mod", command="llama-server -m x", run=run
    )
    with pytest.raises(deps.DeploymentError, match=f"run {run.pk} measured other models"):
        deps.record(spec)
    # Without the run, a draftless deployment sits on the target's own pair, and its soak is recorded there.
    d = deps.record(
        deps.DeploymentSpec(target=smol(team_pair), draft=None, method="ngram-mod", command="llama-server -m x")
    )
    assert d.pair is not None and d.pair.target_base_id == d.pair.draft_base_id == smol(team_pair).model.base_id
    t = soak_target(f"deployment:{d.pk}")
    assert t.pair.pk == d.pair.pk and t.pair.pk != team_pair.pk
    ok = deps.record(
        deps.DeploymentSpec(target=team_pair.target, draft=team_pair.draft, method="draft-simple", command=CMD, run=run)
    )
    assert ok.run_id == run.pk and ok.pair_id == team_pair.pk


def test_the_migration_moves_a_deployment_off_another_pairs_run(team_pair):
    run = recommending_run(team_pair)
    d = Deployment.objects.create(
        target=smol(team_pair), draft=None, pair=team_pair, run=run, method="ngram-mod", command="llama-server -m x",
        author_name="alice", deployed_at=timezone.now(),
    )  # fmt: skip
    correct(django_apps, None)
    d.refresh_from_db()
    assert d.run_id is None and d.pair_id != team_pair.pk


def test_a_soak_keeps_the_benchmarks_bounds_on_k_and_slots(team_pair):
    run = recommending_run(team_pair)
    d = deps.record(
        deps.DeploymentSpec(target=team_pair.target, draft=team_pair.draft, method="draft-simple", command=CMD, k=1000)
    )
    assert d.k == 1000  # a deployment may record what a team runs
    with pytest.raises(BenchmarkError, match="a soak runs K from 1 to 64"):
        soak_target(f"deployment:{d.pk}")
    # An imported result's slots (up to 32,767: a -c of ~67M tokens) never become -np.
    BenchmarkResult.objects.filter(run=run).update(parallel=32767, speedup_min=1.2, speedup_max=1.4, pairs=3)
    with pytest.raises(BenchmarkError, match="ran 32767 slots"):
        soak_target(f"pair:{team_pair.pk}")
    with pytest.raises(BenchmarkError, match="K=65"):
        soak_target(f"pair:{team_pair.pk}", method="draft-simple", k=65)


def test_worker_host_names_reach_only_those_who_may_see_paths(team_pair, client):
    run = recommending_run(team_pair)
    BenchmarkRun.objects.filter(pk=run.pk).update(worker="build-box-7.internal:4242", hardware_class="cpu-2c")
    assert "build-box-7" not in client.get(f"/runs/{run.pk}/").content.decode()
    for host in ("build-box-7.internal", "gpu-node-3.internal"):
        CostMeasurement.objects.create(
            key=f"k-{host}", model_sha256="0" * 64, model_name="q15.gguf", model_size=1, build="11434.0.0",
            hardware_class="cpu-2c/avx2", host=host, threads=2, depth=256,
            data={"seconds": [0.01, 0.02], "batch_sizes": [1, 2]},
        )  # fmt: skip
    page = client.get("/hardware/cpu-2c/").content.decode()
    assert "machine 1" in page and "build-box-7" not in page and "gpu-node-3" not in page
    client.force_login(User.objects.create_user("ann", password="x" * 12))
    assert "build-box-7" in client.get(f"/runs/{run.pk}/").content.decode()
    assert "gpu-node-3" in client.get("/hardware/cpu-2c/").content.decode()


def test_the_deployment_page_says_when_a_queued_scrape_is_running(db, smollm2_path):
    from registry.hub.sources import register_source
    from registry.team.models import Deployment

    f = register_source(str(smollm2_path)).file
    now = timezone.now()
    d = Deployment.objects.create(
        target=f,
        method="none",
        command="llama-server",
        url="http://127.0.0.1:1",
        author_name="t",
        deployed_at=now,
        scrape_queued_at=now,
        scrape_started_at=now,
    )
    staff = Client()
    staff.force_login(User.objects.create_user("sam", password="x-sam-123456", is_staff=True))
    page = staff.get(d.get_absolute_url()).content.decode()
    assert 'id="scrape-state"' in page and "Scrape running since" in page
    assert "waiting for the telemetry worker" not in page


def test_a_deployments_typed_command_and_a_runs_bin_dir_are_hidden_from_anonymous_visitors(headers):
    q05 = reg(headers["q05"], "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05-Q4_K_M.gguf", finished=True)
    secret = "llama-server -m /srv/private/q05.gguf --host gpu-secret-7.corp.internal --spec-type ngram-mod"
    d = record(DeploymentSpec(q05, None, "ngram-mod", secret, host="gpu-secret-7.corp.internal"), author_name="ops")
    r1 = reg(headers["r1"], "deepseek/R1-Distill-Qwen-7B-GGUF", "r1-7b-Q4_K_M.gguf", finished=True)
    run = BenchmarkRun.objects.create(
        pair=pair_of(r1, q05),
        queue="bench.x",
        status=BenchmarkRun.DONE,
        build={"label": "b11434", "bin_dir": "/opt/ops-secret/llama/bin"},
    )
    anonymous = Client()
    for text in (
        anonymous.get(f"/deployments/{d.pk}/").content.decode(),
        anonymous.get(f"/api/deployments/{d.pk}").content.decode(),
        anonymous.get(f"/api/runs/{run.pk}").content.decode(),
    ):
        assert "gpu-secret-7" not in text and "/srv/private" not in text and "ops-secret" not in text
    assert anonymous.get(f"/api/runs/{run.pk}").json()["build"] == {"label": "b11434"}
    member = Client()
    member.force_login(User.objects.create_user("member", password="pw"))
    assert member.get(f"/api/deployments/{d.pk}").json()["command"] == secret
    assert member.get(f"/api/runs/{run.pk}").json()["build"]["bin_dir"] == "/opt/ops-secret/llama/bin"
