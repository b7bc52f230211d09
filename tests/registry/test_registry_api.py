"""The JSON API under Django REST Framework: anonymous reads, writes with a token (or a session with
CSRF) under the site's own permissions, tokens stored as digests only, the OpenAPI schema and its docs page."""

from __future__ import annotations

import hashlib
import io
import json
import re
from datetime import timedelta

import pytest
import yaml
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from drf_spectacular.validation import validate_schema
from knox.models import AuthToken

from registry.models import ReportedResult
from registry.team.models import Deployment, Note
from tests.accounts import client_for
from tests.browser.chromium import shot

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

CMD = "llama-server -m t.gguf -md d.gguf --spec-type draft-simple --spec-draft-n-max 8"
REPORTED = {
    "k": 8,
    "method": "draft-simple",
    "acceptance": 0.71,
    "speedup": 1.42,
    "tokens_per_second": 50.1,
    "baseline_tokens_per_second": 35.3,
    "content_type": "code",
    "hardware": "RTX 4090",
    "llama_cpp_build": "b11434",
    "citation": "team CI job 1234",
    "source_url": "https://ci.example/1234",
}


def make_token(user: User, name: str = "ci", expires: str = "90") -> str:
    """A token made the way a person makes one: on the token page, read once from its answer."""
    r = client_for(user).post("/accounts/tokens/", {"name": name, "expires": expires})
    assert r.status_code == 200
    found = re.search(r'<code class="token">(specreg_[0-9a-f]+)</code>', r.content.decode())
    assert found, "the new token is shown once, on the page that made it"
    return found.group(1)


def with_token(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def post(client: Client, url: str, data: dict):
    return client.post(url, json.dumps(data), content_type="application/json")


def test_every_read_is_open_to_anonymous_visitors(pair):
    d = Deployment.objects.create(
        target=pair.target,
        draft=pair.draft,
        pair=pair,
        method="draft-simple",
        k=4,
        command=CMD,
        author_name="ops",
        deployed_at=timezone.now(),
    )
    anon = Client()
    for url in [
        "/api/pairs",
        "/api/pairs?all=1",
        f"/api/pairs/{pair.pk}",
        f"/api/models/{pair.target.model_id}",
        f"/api/files/{pair.draft_id}",
        "/api/examples",
        f"/api/deployments/{d.pk}",
        "/api/schema/",
        "/api/docs/",
    ]:
        assert anon.get(url).status_code == 200, url
    assert anon.get(f"/api/pairs/{pair.pk}/").status_code == 404  # no trailing-slash redirects, as before
    assert anon.get("/api/pairs/999999").json() == {"detail": "No Pair matches the given query."}


def test_writes_without_a_token_are_refused_with_401(pair):
    anon, bad = Client(), with_token("specreg_" + "0" * 64)
    for client in (anon, bad):
        for url, data in [
            ("/api/notes", {"subject": "pair", "id": pair.pk, "body": "x"}),
            ("/api/deployments", {"target": pair.target_id, "method": "none", "command": CMD}),
            (f"/api/pairs/{pair.pk}/reported", REPORTED),
        ]:
            r = post(client, url, data)
            assert r.status_code == 401, (url, r.content)
            assert r["WWW-Authenticate"] == "Token"
    assert not Note.objects.exists() and not Deployment.objects.exists() and not ReportedResult.objects.exists()


def test_a_token_writes_notes_deployments_and_reported_results_under_the_sites_permissions(pair, alice, staff):
    ci = with_token(make_token(alice))
    r = post(ci, "/api/notes", {"subject": "pair", "id": pair.pk, "body": "Acceptance **drops** on JSON."})
    assert r.status_code == 201, r.content
    note = Note.objects.get()
    assert note.author == alice and r.json()["html"] == "<p>Acceptance <strong>drops</strong> on JSON.</p>"
    assert Client().get(f"/api/notes/{note.pk}").json()["body"] == "Acceptance **drops** on JSON."
    assert post(ci, "/api/notes", {"subject": "pair", "id": 999999, "body": "x"}).status_code == 404
    assert post(ci, "/api/notes", {"subject": "planet", "id": pair.pk, "body": "x"}).status_code == 400

    dep = {
        "target": pair.target_id,
        "draft": pair.draft_id,
        "method": "draft-simple",
        "k": 8,
        "command": CMD,
        "host": "gpu-3",
    }
    r = post(ci, "/api/deployments", dep)
    assert r.status_code == 201, r.content
    assert r.json()["pair"] == pair.pk and r.json()["author"] == "alice" and r.json()["host"] == "gpu-3"
    # Only staff may give a URL (the server scrapes it), as on the page.
    r = post(ci, "/api/deployments", dep | {"url": "http://127.0.0.1:8080"})
    assert r.status_code == 403 and "only staff" in r.json()["error"]
    assert post(ci, "/api/deployments", dep | {"method": "ngram-mod"}).status_code == 400  # a draft with n-gram
    assert post(ci, "/api/deployments", dep | {"target": 999999}).json() == {
        "error": "no registered file with id 999999"
    }

    # Reported results: staff or the permission, never any account.
    r = post(ci, f"/api/pairs/{pair.pk}/reported", REPORTED)
    assert r.status_code == 403 and not ReportedResult.objects.exists()
    boss = with_token(make_token(staff))
    assert post(boss, "/api/deployments", dep | {"url": "http://127.0.0.1:8080"}).status_code == 201
    r = post(boss, f"/api/pairs/{pair.pk}/reported", REPORTED)
    assert r.status_code == 201, r.content
    rep = ReportedResult.objects.get()
    assert (rep.reported_by, rep.method, rep.tokens_per_second, rep.speedup) == (staff, "draft-simple", 50.1, 1.42)
    shown = Client().get(f"/api/pairs/{pair.pk}").json()
    assert shown["reported"][0]["citation"] == "team CI job 1234" and shown["best"]["kind"] == "reported"
    # The form's checks apply: acceptance is a fraction, the method one llama.cpp has.
    r = post(boss, f"/api/pairs/{pair.pk}/reported", REPORTED | {"acceptance": 71, "method": "turbo"})
    assert r.status_code == 400 and "acceptance" in r.json()["error"] and "method" in r.json()["error"]
    alice.user_permissions.add(Permission.objects.get(codename="add_reportedresult"))
    assert post(ci, f"/api/pairs/{pair.pk}/reported", REPORTED).status_code == 201


def test_tokens_are_stored_as_digests_only_and_revoking_one_gives_401(pair, alice):
    token = make_token(alice, name="nightly bench")
    stored = AuthToken.objects.get(user=alice)
    assert stored.digest == hashlib.sha512(token.encode()).hexdigest()
    assert token.startswith(stored.token_key) and len(stored.token_key) < len(token) // 4
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)  # every table of the database
    assert token not in dump.getvalue() and stored.digest in dump.getvalue()
    page = client_for(alice).get("/accounts/tokens/").content.decode()
    assert "nightly bench" in page and stored.token_key in page and token not in page  # shown once only

    ci = with_token(token)
    assert post(ci, "/api/notes", {"subject": "pair", "id": pair.pk, "body": "first"}).status_code == 201
    # Another user cannot revoke it; its owner can, and then it is refused.
    other = User.objects.create_user("mallory", password="pw-mallory-123456")
    client_for(other).post(f"/accounts/tokens/{stored.token_key}/revoke")
    assert AuthToken.objects.filter(user=alice).exists()
    r = client_for(alice).post(f"/accounts/tokens/{stored.token_key}/revoke", follow=True)
    assert "revoked" in r.content.decode() and not AuthToken.objects.filter(user=alice).exists()
    r = post(ci, "/api/notes", {"subject": "pair", "id": pair.pk, "body": "second"})
    assert r.status_code == 401 and Note.objects.count() == 1
    assert ci.get("/api/pairs").status_code == 401  # a bad token is an error, not a silent anonymous read


def test_an_expired_token_is_refused(pair, alice):
    token = make_token(alice, expires="30")
    AuthToken.objects.filter(user=alice).update(expiry=timezone.now() - timedelta(seconds=1))
    assert post(with_token(token), "/api/notes", {"subject": "pair", "id": pair.pk, "body": "x"}).status_code == 401


def test_the_browser_session_writes_with_csrf_only(pair, alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    data = {"subject": "pair", "id": pair.pk, "body": "from the browser"}
    r = post(browser, "/api/notes", data)
    assert r.status_code == 403 and "CSRF" in r.json()["detail"]
    browser.get("/accounts/tokens/")  # any page sets the CSRF cookie
    r = browser.post(
        "/api/notes",
        json.dumps(data),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value,
    )
    assert r.status_code == 201


def test_the_token_page_needs_an_account_and_limits_names():
    assert Client().get("/accounts/tokens/").status_code == 302
    user = User.objects.create_user("carol", password="pw-carol-123456")
    r = client_for(user).post("/accounts/tokens/", {"name": "x" * 101, "expires": "90"})
    assert r.status_code == 400 and not AuthToken.objects.exists()
    assert client_for(user).post("/accounts/tokens/", {"name": "ok", "expires": "forever"}).status_code == 400


def test_the_openapi_schema_is_valid_and_lists_every_endpoint():
    r = Client().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    schema = json.loads(r.content)
    validate_schema(schema)  # drf-spectacular's own check against the OpenAPI 3 JSON schema
    assert set(schema["paths"]) >= {
        "/api/pairs",
        "/api/pairs/{id}",
        "/api/pairs/{id}/reported",
        "/api/models/{id}",
        "/api/files/{id}",
        "/api/check",
        "/api/examples",
        "/api/deployments",
        "/api/deployments/{id}",
        "/api/notes",
        "/api/notes/{id}",
    }
    assert "all" in {p["name"] for p in schema["paths"]["/api/pairs"]["get"]["parameters"]}
    assert schema["components"]["securitySchemes"]["knoxApiToken"]["name"] == "Authorization"
    validate_schema(yaml.safe_load(Client().get("/api/schema/").content))  # the default answer is YAML


def test_the_docs_page_uses_no_cdn_and_no_inline_script():
    r = Client().get("/api/docs/")
    html = r.content.decode()
    assert r.status_code == 200 and "script-src 'self'" in r["Content-Security-Policy"]
    assert re.findall(r"<script[^>]*>\s*[^<\s]", html) == []  # every <script> has a src and no body
    assert "<style" not in html and "//cdn" not in html and "unpkg" not in html and "jsdelivr" not in html
    srcs = re.findall(r'<script src="([^"]+)"', html)
    assert len(srcs) == 3 and all(s.startswith("/") for s in srcs)
    for src in srcs:
        assert Client().get(src.replace("&amp;", "&")).status_code == 200, src
    assert "javascript" in Client().get("/api/docs/?script=").headers["Content-Type"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_docs_page_renders_in_chromium_without_csp_violations(live_server, page):
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.goto(live_server.url + "/api/docs/")
    page.wait_for_selector("text=specreg API")
    page.wait_for_selector("#operations-pairs-pairs_list")
    page.click("#operations-pairs-pairs_list .opblock-summary")
    page.wait_for_selector("text=cursor of the next page")
    shot(page, "api-docs")
    violations = [
        m for m in console if "Content Security Policy" in m or "Refused to" in m or m.startswith("pageerror")
    ]
    assert violations == [], violations
    assert page.locator(".opblock").count() >= 11


def test_notes_and_deployments_are_listed_paged_and_filtered_for_anyone(pair, alice, staff):
    from registry.team import notes as notes_mod

    on_pair = [notes_mod.add_note(pair, f"pair note {i}", alice) for i in range(3)]
    on_file = notes_mod.add_note(pair.target, "file note", alice)
    hidden = notes_mod.add_note(pair, "hidden note", alice)
    notes_mod.set_hidden(hidden, True, staff)
    anon = Client()
    j = anon.get("/api/notes").json()
    assert j["count"] == 4 and [n["id"] for n in j["results"]] == [n.pk for n in (*on_pair, on_file)]
    assert "hidden note" not in json.dumps(j)  # hidden: staff only, as on /api/notes/ID
    j = anon.get(f"/api/notes?pair={pair.pk}&limit=2").json()
    assert [n["body"] for n in j["results"]] == ["pair note 0", "pair note 1"] and j["previous"] is None
    j = anon.get(j["next"]).json()
    assert [n["body"] for n in j["results"]] == ["pair note 2"] and j["next"] is None and j["previous"]
    assert [n["body"] for n in anon.get(f"/api/notes?file={pair.target_id}").json()["results"]] == ["file note"]
    assert anon.get(f"/api/notes?model={pair.target.model_id}").json()["count"] == 0  # on the file, not the model
    assert anon.get("/api/notes?limit=100000").json()["limit"] == 200
    assert anon.get("/api/notes?run=x").status_code == 400 and "run" in anon.get("/api/notes?run=x").json()["error"]
    boss = with_token(make_token(staff))
    listed = boss.get(f"/api/notes?pair={pair.pk}").json()["results"]
    assert [n["hidden"] for n in listed] == [False, False, False, True]

    url = "http://10.9.8.7:8080"
    live = Deployment.objects.create(
        target=pair.target,
        draft=pair.draft,
        pair=pair,
        method="draft-simple",
        k=8,
        command=CMD,
        host="gpu-3",
        url=url,
        author_name="ops",
        deployed_at=timezone.now(),
    )
    gone = Deployment.objects.create(
        target=pair.draft,
        method="ngram-mod",
        k=16,
        command="llama-server -m d.gguf",
        author_name="ops",
        deployed_at=timezone.now(),
        retired_at=timezone.now(),
    )
    r = anon.get("/api/deployments")
    assert r.status_code == 200 and [d["id"] for d in r.json()["results"]] == [live.pk, gone.pk]  # active first
    assert url not in r.content.decode() and "gpu-3" not in r.content.decode()
    assert r.json()["results"][0] | {"observed": None} == anon.get(f"/api/deployments/{live.pk}").json() | {
        "observed": None
    }
    assert [d["id"] for d in anon.get(f"/api/deployments?pair={pair.pk}").json()["results"]] == [live.pk]
    assert [d["id"] for d in anon.get("/api/deployments?active=0").json()["results"]] == [gone.pk]
    assert [d["id"] for d in anon.get(f"/api/deployments?model={pair.draft.model_id}&active=1").json()["results"]] == [
        live.pk
    ]
    assert anon.get("/api/deployments?pair=999999").json()["count"] == 0
    assert anon.get("/api/deployments?active=maybe").status_code == 400
    # With a token the same reads work, and a signed-in user sees the URL and host.
    ci = with_token(make_token(alice))
    shown = ci.get("/api/deployments?active=1").json()["results"]
    assert [(d["url"], d["host"]) for d in shown] == [(url, "gpu-3")]
    assert ci.get("/api/notes").json()["count"] == 4


def test_a_private_installation_shows_nothing_without_signing_in(pair, alice, settings):
    settings.SPECREG_LOGIN_REQUIRED = True
    anon = Client()
    for url in ["/", f"/pairs/{pair.pk}/", f"/models/{pair.target.model_id}/", "/check/", "/pairs.csv"]:
        r = anon.get(url)
        assert r.status_code == 302 and r["Location"].startswith("/accounts/login/?next=/"), url
    for url in ["/api/pairs", f"/api/pairs/{pair.pk}", "/api/notes", "/api/schema/", "/api/runs/1"]:
        r = anon.get(url)
        assert r.status_code == 401 and "signing in" in r.json()["error"], url
    assert anon.get("/accounts/login/").status_code == 200  # signing in stays possible
    assert Client(HTTP_AUTHORIZATION="Token specreg_" + "0" * 64).get("/api/pairs").status_code == 401
    token = make_token(alice)
    assert with_token(token).get("/api/pairs").status_code == 200  # a team's CI signs with its token
    assert with_token(token).get(f"/api/pairs/{pair.pk}").json()["id"] == pair.pk
    assert client_for(alice).get("/").status_code == 200
    settings.SPECREG_LOGIN_REQUIRED = False
    assert anon.get("/").status_code == 200  # the default: a public read-only registry
