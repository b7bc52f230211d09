"""The curated import's outcome, a target checked alone on the web API as ``check_pair TARGET`` answers, and the
API documentation's padlocks."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from inspector import cli
from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.hub.curated import curated_repos
from registry.hub.jobs import execute_job
from registry.models import GGUFFile, HubJob

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"


@pytest.fixture
def user_client():
    c = Client()
    c.force_login(User.objects.create_user("alice", password="correct horse battery"))
    return c


def _curated_job(user_client) -> HubJob:
    r = user_client.post("/import/curated")
    job_id = int(r["Location"].split("/")[2])
    execute_job(job_id)
    return HubJob.objects.get(pk=job_id)


def test_a_curated_import_fails_when_every_repository_failed_and_is_done_when_some_imported(
    user_client, fake_hub, qwen05_header_path
):
    repos = [c["repo"] for c in curated_repos()]
    job = _curated_job(user_client)  # this Hub has none of them
    assert job.status == "failed"
    assert job.error == f"None of the {len(repos)} curated repositories could be imported (each one's reason is above)."
    texts = [m["text"] for m in job.messages]
    assert all(sum(t.startswith(f"{repo}: ") for t in texts) == 1 for repo in repos), texts  # each reason once
    assert job.messages[-1] == {"level": "error", "text": job.error}
    # One repository there: the import is done, and each other repository's warning is said once.
    fake_hub.add_repo(Q05, {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": qwen05_header_path})
    job = _curated_job(user_client)
    assert (job.status, job.error) == ("done", ""), job.messages
    assert [m["level"] for m in job.messages if m["text"].startswith(Q05)] == ["success"]
    warned = [m["text"] for m in job.messages if m["level"] == "warning"]
    others = [r for r in repos if r != Q05]
    assert len(warned) == len(others) and all(sum(w.startswith(f"{r}: ") for w in warned) == 1 for r in others), warned
    assert GGUFFile.objects.get().repo == Q05


def test_the_api_checks_a_target_alone_as_check_pair_target_does(client, user_client, fake_hub, smollm2_path):
    out = io.StringIO()
    assert cli.check(str(smollm2_path), None, as_json=True, out=out) == 0
    expected = json.loads(out.getvalue())
    assert "ngram-mod" in expected["draftless_methods"]
    # A registered file, answered in the request: what check_pair TARGET --json prints (its own source aside).
    info = inspect_source(str(smollm2_path))
    source = f"hf://{SMOL}/smol.gguf"
    register(info, source=source, repo=SMOL, path="smol.gguf", etag="e", size=1)
    r = client.get("/api/check", {"target": source})
    assert r.status_code == 200, r.content
    assert r.json() == expected | {"target": source}
    assert client.get("/api/check", {"target": source, "draft": ""}).json() == r.json()
    # A Hub file an anonymous visitor names: queued, and the job's result is the same answer.
    fake_hub.add_repo("someone/smol", {"s.gguf": smollm2_path})
    remote = "hf://someone/smol/s.gguf"
    queued = client.get("/api/check", {"target": remote})
    assert queued.status_code == 202
    assert execute_job(queued.json()["job"]) == "done"
    job = client.get(queued.json()["url"]).json()
    assert job["result"] == expected | {"target": remote}
    assert job["messages"][-1]["text"].startswith(f"{remote} with no second model: ngram-")
    # A signed-in user's check of the same Hub file is answered in the request.
    assert user_client.get("/api/check", {"target": remote}).json() == expected | {"target": remote}
    # The check page answers too, for the signed-in user at once.
    html = user_client.get("/check/", {"target": remote}).content.decode()
    assert 'id="check-alone"' in html and "--spec-type ngram-mod" in html


def test_the_api_docs_lock_only_what_needs_an_account():
    schema = json.loads(Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    reads = [(p, op) for p, ops in schema["paths"].items() for m, op in ops.items() if m == "get"]
    writes = [(p, op) for p, ops in schema["paths"].items() for m, op in ops.items() if m in ("post", "put", "delete")]
    assert reads and writes
    # Swagger UI draws a padlock on every operation that lists security: anyone may read, so no read lists any.
    assert [p for p, op in reads if "security" in op] == []
    assert all({"knoxApiToken": []} in op["security"] and {} not in op["security"] for _, op in writes)
