"""Issue 8's attacks on the web: the server's token, anonymous cost, server paths, non-finite numbers.

Each test reproduces what an outside review did to the running site and failed before the fix.
"""
from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from registry.models import RateCount
from registry.rate_limits import hit
from registry.registration import register
from inspector.info import inspect_source
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


def test_anonymous_checks_never_borrow_the_server_token_and_private_reads_like_missing(client, hub_with_private):
    public = f"hf://{SMOL}/m.gguf"
    assert _check(client, public, public).status_code == 200
    answers = {}
    for name, spec in {"private": f"hf://{PRIVATE}/m.gguf", "gated": f"hf://{GATED}/m.gguf",
                       "missing repo": "hf://acme/nothing-GGUF/m.gguf", "missing file": f"hf://{SMOL}/none.gguf"}.items():
        r = _check(client, spec, public)
        error = r.json()["error"]
        answers[name] = (r.status_code, error.replace(spec, "SPEC"))
    assert len(set(answers.values())) == 1, answers  # the same status and words for all four
    status, error = answers["private"]
    assert status == 400 and "not found, or not public" in error


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


def test_anonymous_checks_are_rate_limited_per_address_across_processes(client, hub_with_private, settings):
    settings.SPECREG_ANON_CHECKS_PER_MINUTE = 3
    public = f"hf://{SMOL}/m.gguf"
    codes = [_check(client, public, public).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = _check(client, public, public)
    assert "at most 3 a minute" in r.json()["error"] and "\n" not in r.json()["error"]
    # The count lives in the database, where every gunicorn process finds it, under the client address.
    assert RateCount.objects.get(key="check:ip:127.0.0.1").count == 5
    # Another address is counted apart; behind an untrusted proxy X-Forwarded-For changes nothing.
    assert Client(REMOTE_ADDR="10.0.0.9").get("/api/check", {"target": public, "draft": public}).status_code == 200
    spoofed = Client(HTTP_X_FORWARDED_FOR="10.0.0.10").get("/api/check", {"target": public, "draft": public})
    assert spoofed.status_code == 429
    page = client.get("/check/", {"target": public, "draft": public})
    assert page.status_code == 429 and "too many checks" in page.content.decode()


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
    r = _check(client, public, public)
    assert r.status_code == 400 and "100,000" in r.json()["error"]
    staff = Client()
    staff.force_login(User.objects.create_user("sue", password="correct horse battery", is_staff=True))
    assert _check(staff, public, public).status_code == 200


def test_server_paths_stay_hidden_from_anonymous_visitors(client, qwen05_header_path, qwen15_header_path):
    register(inspect_source(str(qwen05_header_path)), source=str(qwen05_header_path))
    reg = register(inspect_source(str(qwen15_header_path)), source=str(qwen15_header_path))
    folder = str(qwen15_header_path.parent)
    pair = reg.file.pairs_as_target.get()  # its page shows the llama-server command with both paths
    pages = ["/", "/check/", f"/models/{reg.file.model_id}/", "/api/pairs", f"/api/models/{reg.file.model_id}",
             f"/api/files/{reg.file.pk}", "/pairs.csv", "/api/pairs?all=1", f"/pairs/{pair.pk}/", f"/api/pairs/{pair.pk}"]
    for url in pages:
        r = client.get(url)
        body = b"".join(r.streaming_content) if r.streaming else r.content
        assert r.status_code == 200, url
        assert folder.encode() not in body, url
    assert qwen15_header_path.name.encode() in client.get(f"/pairs/{pair.pk}/").content  # the name stays
    signed_in = Client()
    signed_in.force_login(User.objects.create_user("amy", password="correct horse battery"))
    assert folder.encode() in signed_in.get(f"/api/files/{reg.file.pk}").content


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_non_finite_numbers_are_refused_and_json_never_holds_nan(client, value):
    r = client.get("/api/pairs", {"min_speedup": value})
    assert r.status_code == 400 and "finite" in r.json()["error"]
    json.loads(r.content, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert client.get("/", {"min_speedup": value}).status_code == 400
