"""Hardening: what reaches a command line, a CSV cell or an anonymous visitor.

Each test reproduces an attack, scaled to stay fast, and shows it held.
"""

from __future__ import annotations

import csv
import importlib
import io

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import User
from django.utils import timezone

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkResult, BenchmarkRun, GGUFFile
from registry.team import deployments as deps
from registry.team.models import Deployment
from runner.errors import BenchmarkError
from runner.models import CostMeasurement
from runner.soak.targets import soak_target
from tests.ggufgen import vocab, write_gguf
from tests.test_team_deployments import CMD, run_of
from tests.test_team_notes import SMOL, infos, pair  # noqa: F401 - fixtures

correct = importlib.import_module("registry.team.migrations.0004_deployments_on_their_own_pairs").correct

pytestmark = [pytest.mark.django_db]


def test_an_anonymous_csv_redacts_each_cell_before_escaping_it(client, tmp_path):
    # A local file whose name is a formula: under its folder the cell needs no escape, and once the folder is
    # cut for an anonymous visitor it does.
    folder = tmp_path / "srv-models"
    folder.mkdir()
    path = write_gguf(folder / "=HYPERLINK(A1,B1).gguf", tokens=vocab(300))
    f = register_source(str(path)).file
    pair_for(f, f)
    body = b"".join(client.get("/pairs.csv?verdict=all").streaming_content).decode()
    rows = list(csv.reader(io.StringIO(body)))
    assert len(rows) == 2
    assert rows[1][0].startswith("'=HYPERLINK") and rows[1][1].startswith("'=HYPERLINK")
    assert str(folder) not in body


# --- 4 and 7: deployments, soaks and what reaches llama-server's argv ---------------------------------------


@pytest.fixture
def team_pair(pair):  # noqa: F811 - the fixture of tests.test_team_notes
    return pair


def smol(pair_):
    return GGUFFile.objects.get(repo=SMOL)


def test_a_deployment_follows_only_a_run_of_its_own_models(team_pair):
    run = run_of(team_pair)  # a run of the Qwen pair
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
    run = run_of(team_pair)
    d = Deployment.objects.create(
        target=smol(team_pair), draft=None, pair=team_pair, run=run, method="ngram-mod", command="llama-server -m x",
        author_name="alice", deployed_at=timezone.now(),
    )  # fmt: skip
    correct(django_apps, None)
    d.refresh_from_db()
    assert d.run_id is None and d.pair_id != team_pair.pk


def test_a_soak_keeps_the_benchmarks_bounds_on_k_and_slots(team_pair):
    run = run_of(team_pair)
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
    run = run_of(team_pair)
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
