"""In headless Chromium at 1366 px: the import page (recent imports, the curated list, where else to go), an
import job's page, the getting-started card, a target checked alone, the table's draft links and the API docs'
padlocks."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.models import HubJob, Pair
from tests.browser.chromium import shot
from tests.browser.steps import PASSWORD, log_in, run_job_behind
from tests.registering import Q05, Q15, SMOL

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_import_page_lists_recent_imports_and_always_offers_the_curated_list(page, live_server, hub):
    log_in(page, live_server)
    page.fill("input[name=repo]", Q05)
    page.click("#import-form button")
    run_job_behind(page)
    page.wait_for_selector("#import-report")
    summary = page.inner_text("#import-report h2")
    assert "1 added" in summary
    assert page.inner_text("main").count(summary) == 1  # the summary heads the report, and is not said again above
    shot(page, "import-job-summary-once")
    # Something is imported: the curated list is still offered here, with the imports so far, newest first.
    page.goto(live_server.url + "/import/")
    page.click("#import-curated")
    run_job_behind(page)
    page.wait_for_selector("#job-messages li.warning")
    assert page.inner_text("#job-status") == "done"  # Q05 and Q15 are on this Hub: a partial import
    page.goto(live_server.url + "/import/")
    rows = page.locator("#recent-imports tbody tr")
    assert rows.count() == 2
    curated, first = HubJob.objects.order_by("-pk")
    assert rows.nth(0).locator("a").get_attribute("href") == curated.get_absolute_url()
    assert "the curated list" in rows.nth(0).inner_text() and "2 repositories imported" in rows.nth(0).inner_text()
    assert Q05 in rows.nth(1).inner_text() and summary in rows.nth(1).inner_text()
    assert page.locator("#import-curated").is_visible()
    # Where to go without importing: the check, a local file, and the two commands.
    links = page.locator("#without-importing a")
    assert [links.nth(i).get_attribute("href") for i in range(links.count())] == ["/check/", "/local/"]
    text = page.inner_text("#without-importing")
    assert "python manage.py inspect_gguf SOURCE" in text and "python manage.py check_pair TARGET [DRAFT]" in text
    shot(page, "import-page-recent-and-curated")


def test_the_getting_started_card_links_to_the_import_form_the_check_and_the_cli(page, live_server):
    User.objects.create_user("alice", password=PASSWORD)
    page.goto(live_server.url + "/")
    card = page.locator("#first-start")
    hrefs = [card.locator("a").nth(i).get_attribute("href") for i in range(card.locator("a").count())]
    assert "/import/" in hrefs and "/check/" in hrefs and "/local/" in hrefs
    assert "inspect_gguf" in card.inner_text() and "check_pair" in card.inner_text()
    shot(page, "getting-started-links")
    page.click("#import-any")  # "import any repository": the form (after signing in)
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("main button")
    page.wait_for_url(f"{live_server.url}/import/")
    assert page.locator("#import-form").is_visible()


def test_check_a_target_alone_as_check_pair_target_does(page, live_server, hub):
    target = f"hf://{SMOL}/SmolLM2-135M-Instruct.Q4_1.gguf"
    page.goto(live_server.url + "/check/")
    page.fill("input[name=target]", target)
    page.click("#check-form button")  # no draft
    run_job_behind(page)  # an anonymous visitor's Hub read runs in a worker
    page.wait_for_selector("#check-alone")
    assert page.inner_text("h1") == f"Check of {target} alone"
    text = page.inner_text("#check-alone")
    assert "--spec-type ngram-mod" in text and "The n-gram methods pay where the output repeats the prompt" in text
    shot(page, "check-target-alone-job")
    log_in(page, live_server)  # a signed-in user's check is answered in the request
    page.goto(live_server.url + "/check/")
    page.fill("input[name=target]", target)
    page.click("#check-form button")
    page.wait_for_selector("#check-alone")
    assert page.url.startswith(f"{live_server.url}/check/?")
    assert page.locator("#alone-methods tbody tr").count() >= 3 and "ngram-mod" in page.inner_text("#alone-methods")
    shot(page, "check-target-alone")


def test_the_tables_draft_name_links_to_the_draft_model_page(page, live_server, qwen05_header_path, qwen15_header_path):
    for repo, path, name in (
        (Q05, qwen05_header_path, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        (Q15, qwen15_header_path, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    ):
        register(inspect_source(str(path)), source=f"hf://{repo}/{name}", repo=repo, path=name, etag=name, size=1)
    pair = Pair.objects.get()
    page.goto(live_server.url + "/")
    link = page.locator("#pairs a.draft-link")
    assert link.count() == 1 and link.get_attribute("href") == pair.draft.get_absolute_url()
    shot(page, "table-draft-link")
    link.click()
    page.wait_for_selector("#inspection")
    assert page.url == live_server.url + pair.draft.get_absolute_url()


def test_the_api_docs_show_no_padlock_on_anonymous_reads(page, live_server):
    page.goto(live_server.url + "/api/docs/")
    page.wait_for_selector("#operations-pairs-pairs_list")
    assert page.locator("#operations-pairs-pairs_list .authorization__btn").count() == 0
    assert page.locator("#operations-pairs-check_pair .authorization__btn").count() == 0
    assert page.locator("#operations-pairs-pair_reported_create .authorization__btn").count() == 1  # a write
    shot(page, "api-docs-padlocks")
