"""Deployments: the command (add, list, retire, bad input), recording from a run, pages, retiring, the JSON."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from inspector.management.base import UserError
from registry.models import BenchmarkRun, GGUFFile
from registry.team.models import Deployment
from tests.runs import CMD, recommending_run
from tests.worker import _database_url

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]
ROOT = Path(__file__).resolve().parents[2]


def out_of(*args) -> str:
    out = io.StringIO()
    call_command("deployment", *args, stdout=out)
    return out.getvalue()


def test_add_list_and_retire_from_the_command_line(pair):
    out = out_of(
        "add",
        "--target",
        str(pair.target.pk),
        "--draft",
        pair.draft.source,
        "--method",
        "draft-simple",
        "--k",
        "4",
        "--command",
        CMD,
        "--host",
        "gpu-01",
    )
    d = Deployment.objects.get()
    assert out.startswith(f"deployment {d.pk}: ") and "gpu-01" in out
    assert d.pair == pair and d.k == 4 and d.command == CMD and d.author_name  # the OS user
    assert d.url == "" and d.retired_at is None
    out_of(
        "add",
        "--target",
        pair.target.source,
        "--method",
        "ngram-mod",
        "--command",
        "llama-server -m x --spec-type ngram-mod",
        "--author",
        "ops-team",
    )
    listing = out_of("list")
    assert listing.count("active") == 2 and "ngram-mod" in listing and "ops-team" in listing
    assert "retired" in out_of("retire", str(d.pk))
    assert str(d.pk) not in out_of("list").split()[0:1]
    assert "retired" in out_of("list", "--all")
    with pytest.raises(UserError, match="already retired"):
        out_of("retire", str(d.pk))
    assert Deployment.objects.count() == 2  # retiring keeps the record


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "draft-simple", "--command", "x"], "needs a draft"),
        (["--method", "ngram-simple", "--draft", "DRAFT", "--command", "x"], "uses no draft model"),
        (["--method", "none", "--command", "   "], "command is required"),
        (["--method", "none", "--command", "x", "--k", "0"], "--k '0'"),
        (["--method", "none", "--command", "x", "--url", "ftp://host/"], "expected http://HOST:PORT"),
        (["--method", "none", "--command", "x", "--url", "http://u:p@host:1/"], "must not carry a user name"),
    ],
)
def test_bad_deployments_are_refused_in_one_line_and_store_nothing(pair, args, message):
    args = [a if a != "DRAFT" else str(pair.draft.pk) for a in args]
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        out_of("add", "--target", str(pair.target.pk), *args)
    assert not Deployment.objects.exists()


def test_unknown_targets_and_ids_are_one_line_errors_with_exit_2(pair, tmp_path):
    with pytest.raises(UserError, match="no registered file with id 999"):
        out_of("add", "--target", "999", "--method", "none", "--command", "x")
    with pytest.raises(UserError, match="no deployment with id 42"):
        out_of("retire", "42")
    with pytest.raises(UserError, match=r"METHOD|invalid choice"):
        out_of("add", "--target", "1", "--method", "fast", "--command", "x")
    # From a shell (on the test database): one line on stderr, exit status 2, no traceback.
    env = {**os.environ, "DATABASE_URL": _database_url()}
    env.pop("TEST_DATABASE_NAME", None)
    r = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "deployment",
            "add",
            "--target",
            str(tmp_path / "missing.gguf"),
            "--method",
            "none",
            "--command",
            "x",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing.gguf" in r.stderr
    assert "Traceback" not in r.stderr and "unexpected" not in r.stderr


def test_record_as_deployed_fills_in_the_runs_recommendation(pair):
    run = recommending_run(pair)
    user = User.objects.create_user("ann", password="x-ann-123456")
    c = Client()
    assert "record-deployed" not in c.get(f"/runs/{run.pk}/").content.decode()
    c.force_login(user)
    page = c.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/deployments/new?run={run.pk}"' in page
    form = c.get(f"/deployments/new?run={run.pk}")
    body = form.content.decode()
    assert form.status_code == 200 and "--spec-draft-n-max 4" in body and 'value="4"' in body
    assert 'name="url"' not in body  # not staff: no URL field at all
    ctx = form.context["form"].initial
    assert ctx["method"] == "draft-simple" and ctx["k"] == 4 and ctx["draft"] == pair.draft.pk and ctx["run"] == run.pk
    r = c.post(f"/deployments/new?run={run.pk}", {**{k: v for k, v in ctx.items() if v is not None}, "host": "gpu-01"})
    d = Deployment.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/deployments/{d.pk}/"
    assert d.run == run and d.pair == pair and d.command == CMD and d.created_by == user
    # The pair page and both models' pages list it; the deployment page shows measured beside observed.
    assert f"/deployments/{d.pk}/" in Client().get(f"/pairs/{pair.pk}/").content.decode()
    assert f"/deployments/{d.pk}/" in Client().get(pair.target.get_absolute_url()).content.decode()
    assert f"/deployments/{d.pk}/" in Client().get(pair.draft.get_absolute_url()).content.decode()
    page = Client().get(f"/deployments/{d.pk}/").content.decode()
    assert "31.0" in page and "77%" in page and "no server URL recorded, so nothing is scraped" in page
    j = Client().get(f"/api/deployments/{d.pk}").json()
    assert j["measured"]["tokens_per_second"] == 31.0 and j["observed"]["samples"] == 0
    assert j["observed"]["acceptance"] is None and j["host"] is None


def test_only_who_recorded_it_or_staff_retire_a_deployment(pair):
    ann = User.objects.create_user("ann", password="x-ann-123456")
    bob = User.objects.create_user("bob", password="x-bob-123456")
    out_of("add", "--target", str(pair.target.pk), "--method", "none", "--command", "llama-server -m x")
    from registry.team import deployments as deps

    d = Deployment.objects.get()
    c = Client()
    c.force_login(bob)
    assert c.post(f"/deployments/{d.pk}/retire").status_code == 403  # recorded from the command line
    d2 = deps.record(
        deps.DeploymentSpec(target=pair.target, draft=None, method="none", command="llama-server -m y"), user=ann
    )
    assert c.post(f"/deployments/{d2.pk}/retire").status_code == 403
    c.force_login(ann)
    assert c.post(f"/deployments/{d2.pk}/retire").status_code == 302
    d2.refresh_from_db()
    assert d2.retired_at is not None
    assert "retired" in Client().get(f"/deployments/{d2.pk}/").content.decode()
    assert Client().post(f"/deployments/{d.pk}/retire").status_code == 302  # to the login page
    d.refresh_from_db()
    assert d.retired_at is None


def test_the_deployment_json_is_at_exactly_its_address(pair):
    out_of("add", "--target", str(pair.target.pk), "--method", "none", "--command", "llama-server -m x")
    d = Deployment.objects.get()
    r = Client().get(f"/api/deployments/{d.pk}")
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    assert Client().get("/api/deployments/999").status_code == 404
    assert r.json()["target"]["id"] == pair.target.pk and r.json()["draft"] is None


def test_a_local_target_is_registered_when_new(smollm2_path):
    out_of("add", "--target", str(smollm2_path), "--method", "ngram-simple", "--command", "llama-server -m m.gguf")
    assert GGUFFile.objects.get().source == str(smollm2_path)
    assert Deployment.objects.get().target.source == str(smollm2_path)


NGRAM_CMD = (
    "llama-server -m models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --spec-type ngram-mod "
    "--spec-ngram-mod-n-max 16 --spec-ngram-mod-n-min 8 --spec-ngram-mod-n-match 24 --port 8080"
)


def test_record_as_deployed_takes_an_ngram_recommendation_from_the_run(pair):
    # The run's command deploys the chat recommendation (deploy_for): ngram-mod, its own length flag, no draft.
    run = BenchmarkRun.objects.create(
        pair=pair,
        queue="specreg",
        status=BenchmarkRun.DONE,
        server_command=NGRAM_CMD,
        summary={
            "deploy_for": "chat",
            "recommendations": [
                {
                    "content_type": "code",
                    "temperature": 0.0,
                    "k": 4,
                    "speedup": 1.2,
                    "method": "draft-simple",
                    "p_min": 0.75,
                    "options": [],
                },
                {
                    "content_type": "chat",
                    "temperature": 0.0,
                    "k": 16,
                    "speedup": 1.5,
                    "method": "ngram-mod",
                    "p_min": None,
                    "options": [["--spec-ngram-mod-n-match", "24"]],
                },
            ],
        },
    )
    c = Client()
    c.force_login(User.objects.create_user("ann", password="x-ann-123456"))
    form = c.get(f"/deployments/new?run={run.pk}")
    ctx = form.context["form"].initial
    assert (ctx["method"], ctx["k"], ctx["draft"]) == ("ngram-mod", 16, None)
    assert ctx["flags"] == "--spec-ngram-mod-n-match 24" and ctx["command"] == NGRAM_CMD
    r = c.post(f"/deployments/new?run={run.pk}", {k: v for k, v in ctx.items() if v is not None})
    assert r.status_code == 302, r.content
    d = Deployment.objects.get()
    assert (d.method, d.k, d.draft, d.run) == ("ngram-mod", 16, None, run)
    # A draftless deployment sits on the target's own pair, where its soaks are recorded.
    assert d.pair.target_base_id == d.pair.draft_base_id == pair.target_base_id
    # Another run deploying the code recommendation: the pair's draft, the recommended p-min.
    run.summary["deploy_for"] = "code"
    from registry.team.deployments import initial_from_run

    got = initial_from_run(run)
    assert (got["method"], got["k"], got["draft"], got["flags"]) == (
        "draft-simple",
        4,
        pair.draft.pk,
        "--spec-draft-p-min 0.75",
    )


@pytest.mark.parametrize(
    "command, expected",
    [
        (NGRAM_CMD, ("ngram-mod", 16, False)),
        ("llama-server -m t.gguf --spec-type ngram-simple --spec-ngram-simple-size-m 48", ("ngram-simple", 48, False)),
        ("llama-server -m t.gguf --spec-type ngram-cache", ("ngram-cache", 8, False)),
        ("llama-server -m t.gguf --spec-type draft-mtp --spec-draft-n-max 3", ("draft-mtp", 3, False)),
        ("llama-server -m t.gguf -md d.gguf --spec-type draft-eagle3 --spec-draft-n-max 6", ("draft-eagle3", 6, True)),
        ("llama-server -m t.gguf -md d.gguf --draft-max 5", ("draft-simple", 5, True)),  # before --spec-type
        ("llama-server -m t.gguf -c 4096", ("none", None, False)),
    ],
)
def test_a_run_without_recommendations_is_read_from_its_commands_spec_type(pair, command, expected):
    from registry.team.deployments import initial_from_run

    run = BenchmarkRun.objects.create(pair=pair, queue="specreg", status=BenchmarkRun.DONE, server_command=command)
    got = initial_from_run(run)
    assert (got["method"], got["k"], got["draft"] is not None) == expected
