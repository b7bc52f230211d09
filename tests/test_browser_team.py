"""In headless Chromium: add a note to a pair, find the pair by it, record a run's recommendation as deployed
with the URL of a real llama-server (--metrics), scrape it from the page and see what it observed."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from inspector.info import inspect_source
from registry.models import Pair
from registry.registration import register
from tests.browser import shot
from tests.test_team_deployments import run_of
from tests.test_team_telemetry import Server, free_port

pytestmark = [pytest.mark.browser, pytest.mark.llama, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct horse battery staple"
Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
Q15 = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"


@pytest.fixture
def pair(qwen05_header_path, qwen15_header_path):
    for path, repo, name in ((qwen05_header_path, Q05, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
                             (qwen15_header_path, Q15, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")):
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


def test_add_a_note_find_it_record_a_deployment_and_see_it_observed(page, live_server, pair, server):
    run = run_of(pair)
    log_in_staff(page, live_server)

    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    page.click("#notes summary")
    page.fill("#notes textarea[name=body]", "K=4 held up on the **A10** box; see `--spec-draft-n-max 4`.\n\n"
                                            "<script>alert('x')</script> stays text.")
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

    page.click("#scrape")  # the first sample: counters as they stand
    page.wait_for_selector("#samples")
    for _ in range(2):
        server.complete()
    page.click("#scrape")
    page.wait_for_selector("#samples tbody tr:nth-child(2)")
    acceptance = page.inner_text("#observed-acceptance")
    assert acceptance.endswith("%") and int(acceptance.rstrip("%")) > 0
    assert page.locator("#telemetry svg.plot").count() == 1
    shot(page, "23-deployment-observed")

    page.goto(f"{live_server.url}/pairs/{pair.pk}/")
    assert "gpu-01" in page.inner_text("#deployments")
    shot(page, "24-pair-page-deployments")
