"""In headless Chromium: add a note to a pair, find the pair by it, record a run's recommendation as deployed
with the URL of a real llama-server (--metrics), scrape it from the page and see what it observed."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from django.contrib.auth.models import User

from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.models import Pair
from registry.team.models import Note
from tests.browser.chromium import shot
from tests.local_servers import Server, free_port
from tests.runs import recommending_run

pytestmark = [pytest.mark.browser, pytest.mark.llama, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"
Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
Q15 = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"


@pytest.fixture
def pair(qwen05_header_path, qwen15_header_path):
    for path, repo, name in (
        (qwen05_header_path, Q05, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        (qwen15_header_path, Q15, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    ):
        register(inspect_source(str(path)), source=f"hf://{repo}/{name}", repo=repo, path=name, etag=name, size=1)
    return Pair.objects.get()


@pytest.fixture
def server(smollm2_path, tmp_path):
    s = Server(smollm2_path, free_port(), tmp_path / "llama-server.log")
    s.start()
    yield s
    s.stop()


def log_in_staff(pg, live_server) -> None:
    User.objects.create_user("sam", password=PASSWORD, is_staff=True)
    pg.goto(f"{live_server.url}/accounts/login/?next=/")
    pg.fill("input[name=username]", "sam")
    pg.fill("input[name=password]", PASSWORD)
    pg.click("main button")
    pg.wait_for_url(f"{live_server.url}/")


def test_add_a_note_find_it_record_a_deployment_and_see_it_observed(page, live_server, pair, server, monkeypatch):
    from registry.team.tasks import scrape_deployment

    queued: list[list] = []  # "scrape now" queues for the telemetry worker; this test plays that worker
    monkeypatch.setattr(scrape_deployment, "apply_async", lambda args, queue: queued.append(args))

    def scrape_now() -> None:
        page.click("#scrape")
        page.wait_for_selector("#scrape-state")  # queued: the page says so, it did not fetch
        while queued:
            scrape_deployment.run(*queued.pop(0))
        page.reload()

    run = recommending_run(pair)
    log_in_staff(page, live_server)

    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    page.click("#notes summary")
    page.fill(
        "#notes textarea[name=body]",
        "K=4 held up on the **A10** box; see `--spec-draft-n-max 4`.\n\n<script>alert('x')</script> stays text.",
    )
    page.click("#notes button:has-text('Add note')")
    page.wait_for_selector("#notes article.note")
    note = page.inner_html("#notes article.note .note-body")
    assert "<strong>A10</strong>" in note and "<script" not in note and "&lt;script&gt;" in note
    shot(page, "20-note-on-a-pair")

    page.goto(f"{live_server.url}/")
    page.fill("input[name=q]", "held up on")
    page.click("#filters button")
    page.wait_for_selector("#pairs")
    assert page.locator("#pairs tbody tr").count() == 1
    shot(page, "21-search-finds-the-note")

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.click("#record-deployed")
    page.wait_for_selector("#deployment-form")
    assert "--spec-draft-n-max 4" in page.input_value("textarea[name=command]")
    assert page.input_value("input[name=k]") == "4"
    page.fill("input[name=host]", "gpu-01")
    page.fill("input[name=url]", server.url)
    shot(page, "22-record-as-deployed")
    page.click("#record-deployment")
    page.wait_for_selector("#deployment-facts")
    assert "gpu-01" in page.inner_text("#deployment-facts")

    scrape_now()  # the first sample: counters as they stand
    page.wait_for_selector("#samples")
    for _ in range(2):
        server.complete()
    scrape_now()
    page.wait_for_selector("#samples tbody tr:nth-child(2)")
    acceptance = page.inner_text("#observed-acceptance")
    assert acceptance.endswith("%") and int(acceptance.rstrip("%")) > 0
    assert page.locator("#telemetry svg.plot").count() == 1
    shot(page, "23-deployment-observed")

    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    assert "gpu-01" in page.inner_text("#deployments")
    shot(page, "24-pair-page-deployments")


def api(live_server, method: str, path: str, token: str, data: dict | None = None) -> tuple[int, dict]:
    """A request to the JSON API from outside the browser, as a script with a token would make it."""
    body = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(
        f"{live_server.url}{path}",
        data=body,
        method=method,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def test_a_token_a_notes_history_and_hiding_and_a_deployment_retired(page, live_server, pair):
    run = recommending_run(pair)
    log_in_staff(page, live_server)

    # 1. A per-user API token: made on the page, shown once, used by a script, revoked.
    page.goto(f"{live_server.url}/accounts/tokens/")
    page.wait_for_selector("#token-new")
    page.fill("#token-new input[name=name]", "nightly bench")
    page.select_option("#token-new select[name=expires]", "30")
    page.click("#token-new button:has-text('Make token')")
    page.wait_for_selector("#new-token code.token")
    token = page.inner_text("#new-token code.token").strip()
    assert re.fullmatch(r"specreg_[0-9a-f]+", token)
    assert "nightly bench" in page.inner_text("#token-list")
    shot(page, "25-api-token-made")

    status, listed = api(live_server, "GET", "/api/notes", token)
    assert status == 200 and listed["count"] == 0
    status, made = api(
        live_server,
        "POST",
        "/api/notes",
        token,
        {"subject": "pair", "id": pair.pk, "body": "From CI: **draft** holds at K=4."},
    )
    assert status == 201 and made["author"] == "sam"
    assert made["html"] == "<p>From CI: <strong>draft</strong> holds at K=4.</p>"

    page.goto(f"{live_server.url}/accounts/tokens/")
    page.wait_for_selector("#token-list table")
    assert token not in page.content()  # shown once only
    page.click("#token-list button:has-text('Revoke')")
    page.wait_for_selector(".messages li")
    assert "revoked" in page.inner_text(".messages")
    assert "None yet." in page.inner_text("#token-list")
    shot(page, "26-api-token-revoked")
    assert api(live_server, "GET", "/api/notes", token)[0] == 401
    assert api(live_server, "POST", "/api/notes", token, {"subject": "pair", "id": pair.pk, "body": "x"})[0] == 401

    # 2. A note: added, edited (the earlier text kept), hidden from all but staff, shown again.
    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    page.wait_for_selector(f"#note-{made['id']}")
    assert "From CI:" in page.inner_text(f"#note-{made['id']} .note-body")  # the token's note
    page.click("#notes summary")
    page.fill("#notes textarea[name=body]", "K=4 held on the **A10** box.")
    page.click("#notes button:has-text('Add note')")
    note = Note.objects.exclude(pk=made["id"]).get()
    sel = f"#note-{note.pk}"
    page.wait_for_selector(sel)
    page.click(f"{sel} a:has-text('history')")
    page.wait_for_selector("#note-edit")
    assert "Never edited." in page.inner_text("#note-history")
    page.fill("#note-edit textarea[name=body]", "K=4 held on the **A10** box; K=6 did not.")
    page.click("#note-edit button:has-text('Save')")
    page.wait_for_selector("#note-history article.note")
    assert "K=6 did not." in page.inner_text("#note-text")
    assert "saved" in page.inner_text(".messages")
    history = page.inner_text("#note-history")
    assert page.locator("#note-history article.note").count() == 1
    assert "written by sam" in history and "replaced" in history and "K=6" not in history
    assert "<strong>A10</strong>" in page.inner_html("#note-history .note-body")
    shot(page, "27-note-edited-with-history")

    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    page.wait_for_selector(sel)
    page.click(f"{sel} button:has-text('Hide')")
    page.wait_for_selector(f"{sel}.hidden-note")
    assert "hidden by staff" in page.inner_text(f"{sel} .note-meta")
    assert "hidden" in page.inner_text(".messages")
    shot(page, "28-note-hidden-seen-by-staff")

    anon_context = page.context.browser.new_context(viewport={"width": 1366, "height": 900})
    try:
        anon = anon_context.new_page()
        anon.set_default_timeout(30_000)
        anon.goto(f"{live_server.url}/pairs/{pair.pk}/")
        anon.wait_for_selector("#notes")
        assert anon.locator(sel).count() == 0 and "K=6" not in anon.inner_text("#notes")
        assert anon.locator(f"#note-{made['id']}").count() == 1  # the other note still shows
        assert "Log in" in anon.inner_text("#notes")
        shot(anon, "29-note-hidden-from-anonymous")
        assert anon.goto(f"{live_server.url}/notes/{note.pk}/").status == 404
    finally:
        anon_context.close()

    page.click(f"{sel} button:has-text('Show')")
    page.wait_for_selector(f"{sel}:not(.hidden-note)")
    assert "hidden by staff" not in page.inner_text(f"{sel} .note-meta")
    assert "K=6 did not." in page.inner_text(f"{sel} .note-body")
    shot(page, "30-note-shown-again")

    # 3. A deployment: recorded from a run (no URL), listed on the target's model page, retired.
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.click("#record-deployed")
    page.wait_for_selector("#deployment-form")
    page.fill("input[name=host]", "gpu-02")
    page.click("#record-deployment")
    page.wait_for_selector("#deployment-facts")
    deployment_url = page.url
    assert "gpu-02" in page.inner_text("#deployment-facts") and "none (no telemetry)" in page.inner_text(
        "#deployment-facts"
    )
    assert page.locator("#scrape").count() == 0  # nothing to scrape without a URL
    assert "active" in page.inner_text("h1")

    page.goto(f"{live_server.url}{pair.target.get_absolute_url()}")
    page.wait_for_selector("#deployments table.deployments")
    row = page.inner_text("#deployments tbody tr")
    assert "gpu-02" in row and "active" in row and pair.target.model.name in row
    shot(page, "31-model-page-lists-the-deployment")

    page.goto(deployment_url)
    page.click("#retire")
    page.wait_for_selector("h1:has-text('retired')")
    assert re.search(r"retired \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", page.inner_text("h1"))
    assert "retired" in page.inner_text(".messages") and page.locator("#retire").count() == 0
    shot(page, "32-deployment-retired")

    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    page.wait_for_selector("#deployments table.deployments")
    row = page.inner_text("#deployments tbody tr")
    assert "gpu-02" in row and re.search(r"retired \d{4}-\d{2}-\d{2}", row) and "active" not in row
    assert page.locator("#deployments tbody tr").count() == 1
    shot(page, "33-pair-page-deployment-retired")
