"""End to end in headless Chromium (Debian's, driven by Playwright): import, search, pair page, check, local header."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from inspector.info import inspect_source
from registry.models import Pair
from registry.results.reporting import add_reported
from runner.tasks import adapt_job
from tests.browser.chromium import shot
from tests.browser.steps import log_in, run_job_behind
from tests.models import model_path
from tests.near_miss import r1_like
from tests.registering import Q05, Q15, SMOL

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_first_start_offers_examples_and_says_when_the_hub_is_unreachable(page, live_server, fake_hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    page.goto(live_server.url + "/")
    assert page.locator("#first-start").is_visible()
    assert "72.1%" in page.inner_text("#first-start")
    shot(page, "01-first-start")
    log_in(page, live_server)
    page.goto(live_server.url + "/")
    page.click("#import-curated")
    run_job_behind(page)
    page.wait_for_selector("#job-messages li.error")
    assert "cannot be reached" in page.inner_text("#job-messages")
    shot(page, "02-curated-hub-unreachable")


def test_import_search_and_open_a_pair(page, live_server, hub):
    log_in(page, live_server)
    for repo in (Q05, Q15, SMOL):
        page.goto(live_server.url + "/import/")
        page.fill("input[name=repo]", repo)
        page.click("#import-form button")
        run_job_behind(page)
        page.wait_for_selector("#import-report")
        assert "1 added" in page.inner_text("#import-report h2")
    shot(page, "03-import-report")
    page.goto(live_server.url + "/")
    page.fill("input[name=q]", "coder")
    page.click("#filters button")
    page.wait_for_selector("#pairs")
    assert page.locator("#pairs tbody tr").count() == 1
    assert "Qwen2.5-Coder-1.5B-Instruct" in page.inner_text("#pairs")  # the base model, not the file's name
    shot(page, "04-table-search")
    # No published figure exists for this pair (the shipped ones are for larger targets): a team's own,
    # added as the pair page's form or the API would.
    pair = Pair.objects.get(target__repo=Q15, draft__repo=Q05)
    add_reported(
        pair,
        {
            "k": "4",
            "acceptance": "0.767",
            "speedup": "0.504",
            "content_type": "code",
            "hardware": "2-core CPU",
            "llama_cpp_build": "b11434",
            "citation": "team CI",
        },
    )
    page.click("#pairs a.pair-link")
    page.wait_for_selector("#rules")
    text = page.inner_text("main")
    assert "5. Token texts from id 5" in text and "llama-server -m models/qwen2.5-coder-1.5b" in text
    assert "Reported results" in text and page.locator("#reported svg.plot").count() == 1
    shot(page, "05-pair-page")
    page.click("h1 a >> nth=1")  # the target, by its base model's name
    page.wait_for_selector("#inspection")
    assert "Effective in llama.cpp" in page.inner_text("#bos-eos")
    shot(page, "06-model-page")


def test_check_a_pair_explains_a_failing_rule(page, live_server, hub):
    page.goto(live_server.url + "/check/")
    page.fill("input[name=target]", f"hf://{Q15}/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    page.fill("input[name=draft]", f"hf://{SMOL}/SmolLM2-135M-Instruct.Q4_1.gguf")
    page.click("#check-form button")
    run_job_behind(page)  # an anonymous visitor's Hub reads run in a worker, not in the request
    page.wait_for_selector("#check-result")
    text = page.inner_text("#check-result")
    assert "llama.cpp refuses the pair" in text and "differ by 102,784" in text
    shot(page, "07-check-a-pair")


def test_the_local_header_page_sends_only_the_header(page, live_server, hub, smollm2_path, monkeypatch):
    from registry.hub.importing import import_hf
    from registry.web import tools as views_tools

    import_hf(SMOL)  # so the local file has a registered partner
    header_size = inspect_source(str(smollm2_path)).header_size
    sent: list[int] = []
    received: list[int] = []
    real = views_tools.inspect_prefix
    monkeypatch.setattr(
        views_tools,
        "inspect_prefix",
        lambda name, data, total, *cap: received.append(len(data)) or real(name, data, total, *cap),
    )
    page.on(
        "request", lambda r: sent.append(len(r.post_data_buffer or b"")) if r.url.endswith("/local/inspect") else None
    )
    page.goto(live_server.url + "/local/")
    page.set_input_files("#gguf-file", str(smollm2_path))
    page.wait_for_selector("#partners")
    assert header_size <= sum(sent) <= 2 * header_size
    assert sum(received) == sum(sent)  # what the server got is what the browser says it sent
    assert int(page.get_attribute("#local-status", "data-sent")) == sum(sent)
    assert smollm2_path.stat().st_size > 50 * sum(sent)  # 98 MB file, ~1.8 MB sent
    assert "compatible" in page.inner_text("#partners")
    shot(page, "08-local-header")


def test_staff_crawl_an_author_and_follow_it_to_the_end(page, live_server, hub):
    from registry.hub import crawl as crawls
    from registry.models import Crawl

    log_in(page, live_server)
    User.objects.filter(username="alice").update(is_staff=True)
    page.click("#crawl-link a")
    page.wait_for_url("**/crawls/")
    page.select_option("select[name=by]", "author")
    page.fill("input[name=query]", "Qwen")
    page.click("#crawl-form button")
    page.wait_for_url("**/crawls/*/")
    assert page.inner_text("#crawl-status") == "queued"
    crawls.run_here(Crawl.objects.get(), lambda line: None)  # what the crawl worker does with the queued tasks
    page.goto(page.url)
    assert page.inner_text("#crawl-status") == "done"
    assert page.inner_text("#crawl-line") == "2 of 2 repositories"
    assert page.get_attribute("#crawl-progress", "value") == "2"
    assert "Qwen2.5-Coder-1.5B" in page.inner_text("#crawl-recent")
    shot(page, "crawl-done")
    page.goto(f"{live_server.url}/crawls/")
    assert "Qwen" in page.inner_text("#crawls")


def test_adapt_a_near_miss_draft_from_its_pair_page(page, live_server, fake_hub, tmp_path, settings):
    """Adapting a draft as a user meets it: the near-miss pair's page says what adapting changes; a click has a worker
    adapt the draft; the job page leads to the new, compatible pair, whose draft says where it came from."""
    settings.SPECREG_MODEL_DIR = tmp_path / "models"
    r1 = r1_like(model_path("qwen15", headers_only=True), tmp_path / "r1-like-1.5b.part1.gguf")
    fake_hub.add_repo("deepseek/R1-like-1.5B-GGUF", {"r1-like-1.5b-Q4_K_M.gguf": r1})
    fake_hub.add_repo(Q05, {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": model_path("qwen05")})
    log_in(page, live_server)
    for repo in ("deepseek/R1-like-1.5B-GGUF", Q05):
        page.goto(live_server.url + "/import/")
        page.fill("input[name=repo]", repo)
        page.click("#import-form button")
        run_job_behind(page)
        page.wait_for_selector("#import-report")
    pair = Pair.objects.get(draft__repo=Q05)
    page.goto(live_server.url + pair.get_absolute_url())
    page.wait_for_selector("#adaptable")
    text = page.inner_text("#adaptable")
    assert "Adaptable: 7 special tokens, BOS" in text and "<think>" in text
    shot(page, "30-adaptable-pair")
    page.click("#adapt-form button")
    page.wait_for_url("**/jobs/*/")
    adapt_job(int(page.url.rstrip("/").rsplit("/", 1)[1]))  # what the runner's worker runs
    page.goto(page.url)
    page.wait_for_selector("#adapt-result")
    shot(page, "31-adapt-job")
    page.click("#adapt-result a >> nth=1")
    page.wait_for_selector("#rules")
    assert "compatible" in page.inner_text("main").lower()
    made = Pair.objects.exclude(pk=pair.pk).get(target_base=pair.target_base)
    page.goto(live_server.url + made.draft.get_absolute_url())
    page.wait_for_selector("#adapted-from")
    assert "Adapted from" in page.inner_text("#adapted-from")
    shot(page, "32-adapted-draft")
