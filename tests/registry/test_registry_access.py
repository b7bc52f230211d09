"""Attacks on the web: the server's token, anonymous cost, server paths, non-finite numbers.

Each test reproduces an attack on the running site that succeeded before the fix.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from inspector.info import inspect_source
from registry.access.rate_limits import hit
from registry.catalog.registration import register
from registry.hub.jobs import execute_job
from registry.models import BenchmarkRun, HubJob, RateCount
from tests.models import model_path

pytestmark = pytest.mark.django_db

SMOL = "org/SmolLM2-GGUF"
PRIVATE = "acme/private-GGUF"
GATED = "google/gated-GGUF"


@pytest.fixture
def hub_with_private(fake_hub, monkeypatch):
    path = model_path("smollm2", headers_only=True)
    fake_hub.add_repo(SMOL, {"m.gguf": path})
    fake_hub.add_repo(PRIVATE, {"m.gguf": path}, private=True)
    fake_hub.add_repo(GATED, {"m.gguf": path}, gated=True)
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)  # the server holds a token that reads all three
    return fake_hub


def _check(client: Client, target: str, draft: str):
    return client.get("/api/check", {"target": target, "draft": draft})


def _queued_check(client: Client, target: str, draft: str) -> HubJob:
    """An anonymous check that reads the Hub: answered 202 with its job, then run as the worker would."""
    r = _check(client, target, draft)
    assert r.status_code == 202, r.content
    body = r.json()
    assert body == {
        "status": "queued",
        "job": body["job"],
        "url": f"/api/jobs/{body['job']}",
        "page": f"/jobs/{body['job']}/",
    }
    assert HubJob.objects.get(pk=body["job"]).status == HubJob.QUEUED  # nothing was read in the request
    execute_job(body["job"])
    return HubJob.objects.get(pk=body["job"])


def test_anonymous_checks_never_borrow_the_server_token_and_private_reads_like_missing(client, hub_with_private):
    public = f"hf://{SMOL}/m.gguf"
    job = _queued_check(client, public, public)
    assert job.status == "done" and job.result["compatible"] is True and job.params["server_token"] is False
    assert not any("Authorization" in r.headers for r in hub_with_private.requests)  # no token was sent
    answers = {}
    for name, spec in {
        "private": f"hf://{PRIVATE}/m.gguf",
        "gated": f"hf://{GATED}/m.gguf",
        "missing repo": "hf://acme/nothing-GGUF/m.gguf",
        "missing file": f"hf://{SMOL}/none.gguf",
    }.items():
        job = _queued_check(client, spec, public)
        answers[name] = (job.status, job.error.replace(spec, "SPEC"))
    assert len(set(answers.values())) == 1, answers  # the same status and words for all four
    status, error = answers["private"]
    assert status == "failed" and "not found, or not public" in error
    assert not any("Authorization" in r.headers for r in hub_with_private.requests)


def test_a_signed_in_user_needs_the_permission_for_the_server_token(hub_with_private):
    private = f"hf://{PRIVATE}/m.gguf"
    user = User.objects.create_user("bob", password="correct horse battery")
    c = Client()
    c.force_login(user)
    assert _check(c, private, private).status_code == 400
    user.user_permissions.add(Permission.objects.get(codename="use_server_token"))
    c.force_login(User.objects.get(pk=user.pk))  # a fresh user object: permissions are cached per object
    r = _check(c, private, private)
    assert r.status_code == 200 and r.json()["compatible"] is True
    staff = User.objects.create_user("sue", password="correct horse battery", is_staff=True)
    c.force_login(staff)
    assert _check(c, private, private).status_code == 200


def test_anonymous_checks_are_rate_limited_per_address_across_processes(
    client, hub_with_private, settings, still_clock
):
    settings.SPECREG_ANON_CHECKS_PER_MINUTE = 3
    public = f"hf://{SMOL}/m.gguf"
    codes = [_check(client, public, public).status_code for _ in range(4)]
    assert codes == [202, 202, 202, 429]  # counted before anything is queued
    assert HubJob.objects.count() == 3
    r = _check(client, public, public)
    assert "at most 3 a minute" in r.json()["error"] and "\n" not in r.json()["error"]
    # The count lives in the database, where every gunicorn process finds it, under the client address.
    assert RateCount.objects.get(key="check:ip:127.0.0.1").count == 5
    # Another address is counted apart; behind an untrusted proxy X-Forwarded-For changes nothing.
    assert Client(REMOTE_ADDR="10.0.0.9").get("/api/check", {"target": public, "draft": public}).status_code == 202
    spoofed = Client(HTTP_X_FORWARDED_FOR="10.0.0.10").get("/api/check", {"target": public, "draft": public})
    assert spoofed.status_code == 429
    page = client.get("/check/", {"target": public, "draft": public})
    assert page.status_code == 429 and "too many checks" in page.content.decode()
    assert HubJob.objects.count() == 4


def test_the_window_count_is_atomic_and_old_windows_are_forgotten():
    assert hit("k", 5, now=600.0) == (1, 60)
    assert hit("k", 5, now=630.0) == (2, 30)
    assert hit("k", 5, now=700.0)[0] == 1  # a new window
    assert set(RateCount.objects.values_list("window", flat=True)) == {600, 660}
    assert hit("other", 5, now=900.0)[0] == 1
    assert set(RateCount.objects.values_list("window", flat=True)) == {900}  # windows that are over go


def test_anonymous_reads_have_a_smaller_header_cap(client, hub_with_private, settings):
    settings.SPECREG_PUBLIC_MAX_HEADER_BYTES = 100_000  # SmolLM2's header is 1.8 MB
    public = f"hf://{SMOL}/m.gguf"
    job = _queued_check(client, public, public)  # the worker reads as the visitor would: the public cap
    assert job.status == "failed" and "100,000" in job.error
    staff = Client()
    staff.force_login(User.objects.create_user("sue", password="correct horse battery", is_staff=True))
    assert _check(staff, public, public).status_code == 200


def test_a_check_of_a_split_file_with_too_many_shards_is_refused_at_once(client, hub_with_private):
    from inspector.hub_names import MAX_SHARDS

    r = _check(client, "hf://a/b/m-00001-of-99999.gguf", f"hf://{SMOL}/m.gguf")  # was: 99,999 names, then reads
    assert (
        r.status_code == 400 and f"a split file of 99,999 shards; at most {MAX_SHARDS:,} are read" in r.json()["error"]
    )
    assert hub_with_private.requests == []  # at once: refused before any request, for either file


def test_anonymous_header_uploads_have_the_public_cap(client, settings, smollm2_path):
    settings.SPECREG_PUBLIC_MAX_HEADER_BYTES = 100_000  # SmolLM2's header is 1.8 MB
    data = smollm2_path.read_bytes()[:2_000_000]
    size = str(smollm2_path.stat().st_size)

    def send(c: Client, n: int):
        return c.post(
            "/local/inspect",
            data[:n],
            content_type="application/octet-stream",
            headers={"X-File-Name": "smol.gguf", "X-File-Size": size},
        )

    r = send(client, 200_000)  # was: read in full (up to 64 MiB) for anyone
    assert r.status_code == 413 and "more than the 100,000-byte header cap" in r.json()["error"]
    r = send(client, 100_000)
    assert r.status_code == 422 and "100,000-byte header cap" in r.json()["error"]
    assert '"cap": 100000' in client.get("/local/").content.decode()  # the page slices no further
    staff = Client()
    staff.force_login(User.objects.create_user("sue", password="correct horse battery", is_staff=True))
    assert send(staff, 2_000_000).json()["status"] == "ok"


def test_server_paths_stay_hidden_from_anonymous_visitors(client, qwen05_header_path, qwen15_header_path):
    register(inspect_source(str(qwen05_header_path)), source=str(qwen05_header_path))
    reg = register(inspect_source(str(qwen15_header_path)), source=str(qwen15_header_path))
    folder = str(qwen15_header_path.parent)
    pair = reg.file.pairs_as_target.get()  # its page shows the llama-server command with both paths
    # A finished run quotes the paths in its report (served as text/markdown), unit, command and log.
    command = f"llama-server -m {pair.target.source} -md {pair.draft.source}"
    run = BenchmarkRun.objects.create(
        pair=pair,
        queue="bench.cpu",
        status="done",
        server_command=command,
        log=f"ran {command}\n",
        report_md=f"# Run\n\n    {command}\n",
        systemd_unit=f"[Service]\nExecStart={command}\n",
    )
    pages = [
        "/",
        "/check/",
        f"/models/{reg.file.model_id}/",
        "/api/pairs",
        f"/api/models/{reg.file.model_id}",
        f"/api/files/{reg.file.pk}",
        "/pairs.csv",
        "/api/pairs?all=1",
        f"/pairs/{pair.pk}/",
        f"/api/pairs/{pair.pk}",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/report",
        f"/runs/{run.pk}/unit",
        f"/runs/{run.pk}/command",
        f"/api/runs/{run.pk}",
    ]
    for url in pages:
        r = client.get(url)
        body = b"".join(r.streaming_content) if r.streaming else r.content
        assert r.status_code == 200, url
        assert folder.encode() not in body, url
    assert qwen15_header_path.name.encode() in client.get(f"/pairs/{pair.pk}/").content  # the name stays
    signed_in = Client()
    signed_in.force_login(User.objects.create_user("amy", password="correct horse battery"))
    assert folder.encode() in signed_in.get(f"/api/files/{reg.file.pk}").content
    assert folder.encode() in signed_in.get(f"/runs/{run.pk}/report").content


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_non_finite_numbers_are_refused_and_json_never_holds_nan(client, value):
    r = client.get("/api/pairs", {"min_speedup": value})
    assert r.status_code == 400 and "finite" in r.json()["error"]
    json.loads(r.content, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert client.get("/", {"min_speedup": value}).status_code == 400
