"""Hardening, continued: attacks that test_hardening.py (965175c) did not reproduce (no llama.cpp).

H: the per-address throttle answered only on /accounts/login/, while /admin/login/ is a second login form
   whose failures counted but which was never throttled; and nothing showed that failures against one
   username from one address leave that user free to sign in from another.
J: a newline inside a note link's target survived sanitising; browsers drop ASCII tab and newline from
   URLs (WHATWG URL parser), so "/\\n/evil.example" was followed as the protocol-relative //evil.example.
A: the deployment page's "scrape running" state (scrape_started_at set) was never looked at.
F: a Hub import job had no deadline of its own: each file's header read had one, but a job of many files
   (or a Hub listing or search, which had a timeout per socket read only) could hold a worker for hours.
   One deadline per job now bounds every read the job makes, a watchdog ends the one under way, and what
   was imported before stays.
"""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from inspector.hub_api import list_gguf_files, search_models
from inspector.management.base import UserError
from inspector.sources import SourceError
from registry.hub import importing
from registry.hub.importing import JobDeadlinePassed, hub_job_deadline, import_hf
from registry.hub.jobs import execute_job
from registry.models import GGUFFile, HubJob
from registry.team.notes import _link_filter, render
from tests.ggufgen import vocab, write_gguf
from tests.hub import needs_proc, settles, sockets_to

pytestmark = pytest.mark.db_service


# --- H ---------------------------------------------------------------------------------------------


def test_failures_against_one_user_from_one_address_do_not_lock_that_user_out_elsewhere(db, still_clock):
    User.objects.create_user("bob", password="correct horse battery staple")
    stranger = Client(REMOTE_ADDR="192.0.2.66")
    for _ in range(6):  # past AXES_FAILURE_LIMIT (5), below the per-address throttle (30)
        stranger.post("/accounts/login/", {"username": "bob", "password": "guess"})
    r = stranger.post("/accounts/login/", {"username": "bob", "password": "correct horse battery staple"})
    assert "_auth_user_id" not in stranger.session  # the pair (bob, this address) is locked
    bob = Client(REMOTE_ADDR="198.51.100.7")
    r = bob.post("/accounts/login/", {"username": "bob", "password": "correct horse battery staple"})
    assert r.status_code == 302 and "_auth_user_id" in bob.session  # bob himself is not


def test_the_admin_login_form_is_throttled_per_address_like_the_other(db, settings, still_clock):
    settings.SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE = 3
    User.objects.create_user("sam", password="correct horse battery staple", is_staff=True)
    guesser = Client(REMOTE_ADDR="192.0.2.77")
    codes = [
        guesser.post("/admin/login/", {"username": f"staff{i}", "password": "guess"}).status_code for i in range(6)
    ]
    assert codes[3:] == [429, 429, 429], codes  # was: 200 every time, the throttle guarded /accounts/login/ only
    r = guesser.post("/admin/login/", {"username": "sam", "password": "correct horse battery staple"})
    assert r.status_code == 429 and b"too many failed logins from this address" in r.content
    # one count per address, whichever form the failures came through
    assert guesser.post("/accounts/login/", {"username": "sam", "password": "guess"}).status_code == 429
    # another address signs in to the admin as ever, and sam is not locked out
    office = Client(REMOTE_ADDR="198.51.100.8")
    r = office.post("/admin/login/", {"username": "sam", "password": "correct horse battery staple"})
    assert r.status_code == 302 and "_auth_user_id" in office.session


# --- J ---------------------------------------------------------------------------------------------


def _as_a_browser_reads(href: str) -> str:
    """What the WHATWG URL parser makes of an href before resolving it: leading/trailing C0 controls and
    spaces stripped, every ASCII tab and newline removed, and (for http(s) pages) backslashes read as slashes."""
    href = href.strip("".join(map(chr, range(0x21))))
    return re.sub(r"[\t\n\r]", "", href).replace("\\", "/")


@pytest.mark.parametrize(
    "link", ["/\n/evil.example", "/\r\n/evil.example", "/\r/evil.example", "/\n\\evil.example", "\\\n\\evil.example"]
)
def test_a_newline_inside_a_note_link_does_not_make_it_protocol_relative(link):
    html = str(render(f"[click]({link})"))
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert not any(_as_a_browser_reads(h).startswith("//") for h in hrefs), html


@pytest.mark.parametrize(
    "href",
    [
        "/\n/evil.example",
        "/\r\n/evil.example",
        "/\r/evil.example",
        "/\t/evil.example",
        "\t//evil.example",
        "\x00 //evil.example",
        "\x1f//evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "\\/evil.example",
        "java\nscript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "ftp://evil.example/",
    ],
)
def test_links_that_leave_the_site_in_disguise_lose_their_href(href):
    assert _link_filter("a", "href", href) is None


@pytest.mark.parametrize(
    "href, followed",
    [
        ("https://github.com/ggml-org/llama.cpp", "https://github.com/ggml-org/llama.cpp"),
        (" HTTPS://example.org/a ", "HTTPS://example.org/a"),
        ("mailto:team@example.org", "mailto:team@example.org"),
        ("/pairs/1/", "/pairs/1/"),
        ("notes/2", "notes/2"),
        ("?q=a:b", "?q=a:b"),
        ("#drafts", "#drafts"),
        ("/pa\nirs/1/", "/pairs/1/"),  # the page gets the URL the browser would follow
    ],
)
def test_links_to_urls_mail_and_this_site_stay_as_a_browser_reads_them(href, followed):
    assert _link_filter("a", "href", href) == followed


# --- A ---------------------------------------------------------------------------------------------


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


# --- F: one deadline per Hub job -------------------------------------------------------------------

JOB_DEADLINE = 4
REPO = "owner/many-GGUF"
PATHS = ["a.gguf", "b.gguf", "c.gguf"]


@pytest.fixture
def three_files(fake_hub, tmp_path):
    header = write_gguf(tmp_path / "m.gguf", tokens=vocab(2000))  # 25 KB: dripped, it would take hours
    fake_hub.add_repo(REPO, dict.fromkeys(PATHS, header))
    return fake_hub


@needs_proc
def test_an_import_job_ends_at_its_deadline_and_keeps_what_it_imported(three_files, db, settings, monkeypatch):
    settings.SPECREG_HUB_JOB_DEADLINE_SECONDS = JOB_DEADLINE
    real = importing.register

    def register_then_slow_down(*args, **kwargs):
        reg = real(*args, **kwargs)
        three_files.drip_seconds = 0.5  # the first file is in; from now on the server sends a byte at a time
        return reg

    monkeypatch.setattr(importing, "register", register_then_slow_down)
    job = HubJob.objects.create(kind=HubJob.IMPORT_REPO, queue="specreg", params={"repo": REPO})
    started = time.monotonic()
    assert execute_job(job.pk) == "failed"
    assert time.monotonic() - started < JOB_DEADLINE + 10  # does not hang: was hours (a minute per file at the default)
    job.refresh_from_db()
    assert job.error == (
        f"{REPO}: stopped at the job's deadline of {JOB_DEADLINE} s (SPECREG_HUB_JOB_DEADLINE_SECONDS) "
        "after 1 of 3 file(s); what they registered is kept"
    )
    assert job.messages[-1] == {"level": "error", "text": job.error}
    assert [(o["source"], o["status"]) for o in job.result["outcomes"]] == [(f"hf://{REPO}/a.gguf", "added")]
    assert list(GGUFFile.objects.values_list("path", flat=True)) == ["a.gguf"]  # kept
    assert settles(lambda: sockets_to(three_files.cdn_url) == 0)  # the watchdog ended the dripping read
    assert settles(lambda: three_files.dripping == 0)


@needs_proc
def test_a_dripping_hub_listing_ends_at_the_jobs_deadline_and_nothing_starts_after_it(three_files, db, settings):
    settings.SPECREG_HUB_JOB_DEADLINE_SECONDS = JOB_DEADLINE
    three_files.drip_seconds, three_files.drip_api = 0.5, True  # the API's answers too, status line first
    with hub_job_deadline():
        started = time.monotonic()
        with pytest.raises(JobDeadlinePassed) as exc:
            import_hf(REPO)
        assert time.monotonic() - started < JOB_DEADLINE + 10  # does not hang: was one socket read timeout per byte
        assert str(exc.value) == (
            f"hf://{REPO}: the job's deadline of {JOB_DEADLINE} s passed (SPECREG_HUB_JOB_DEADLINE_SECONDS)"
        )
        asked = len(three_files.requests)
        with pytest.raises(SourceError, match="the job's deadline of 4 s passed"):
            search_models(search="many")
        assert len(three_files.requests) == asked  # refused without a request
    assert settles(lambda: sockets_to(three_files.url) == 0)
    assert not GGUFFile.objects.exists()


def test_a_dripping_hub_listing_ends_at_the_header_deadline_outside_a_job(three_files, monkeypatch):
    monkeypatch.setenv("SPECREG_HEADER_DEADLINE_SECONDS", "3")
    three_files.drip_seconds, three_files.drip_api = 0.5, True
    for call in (lambda: list_gguf_files(REPO), lambda: search_models(search="many")):
        started = time.monotonic()
        with pytest.raises(SourceError, match=r"the Hub did not answer within 3 s \(SPECREG_HEADER_DEADLINE_SECONDS\)"):
            call()
        assert time.monotonic() - started < 3 + 10  # does not hang: was HfApi's 30 s per socket read, and no end


def test_the_import_command_shares_one_deadline_too(three_files, db, settings):
    settings.SPECREG_HUB_JOB_DEADLINE_SECONDS = 3
    three_files.drip_seconds = 0.5
    started = time.monotonic()
    with pytest.raises(UserError) as exc:
        call_command("import_hf", REPO)
    assert time.monotonic() - started < 3 + 10  # one deadline for the job: was a minute for the first file alone
    assert str(exc.value) == (
        f"{REPO}: stopped at the job's deadline of 3 s (SPECREG_HUB_JOB_DEADLINE_SECONDS) "
        "after 0 of 3 file(s); what they registered is kept"
    )
