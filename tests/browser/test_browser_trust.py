"""In headless Chromium at 1366 px: what a user trusts. A one-repeat gain is not the table's headline and the pair
page says why; the verdict menu speaks the verdict's words and filters adaptable rows; rows name and search the
model, not the file; the R1 model page lists its adaptable drafts; header-only files are oriented by their sizes."""

from __future__ import annotations

import pytest

from registry.models import BenchmarkResult, BenchmarkRun
from registry.results.figures import refresh_best
from registry.table.request import VERDICTS
from tests.browser.chromium import shot
from tests.real_files import pair_of
from tests.registering import reg

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def one_repeat(pair) -> None:
    run = BenchmarkRun.objects.create(pair=pair, queue="bench.x", status=BenchmarkRun.DONE)
    BenchmarkResult.objects.create(
        run=run, pair=pair, k=4, method="draft-simple", content_type="code", speedup=2.13, acceptance=0.9,
        tokens_per_second=60.0, baseline_tokens_per_second=28.2, n_predict=64, repeats=1, n_prompts=1, status="ok",
        speedup_min=2.13, speedup_max=2.13, pairs=1,
    )  # fmt: skip
    refresh_best(pair)


def test_headlines_verdicts_names_and_adaptable_drafts(page, live_server, files):
    good = pair_of(files["q15"], files["q05"])
    one_repeat(good)
    page.goto(live_server.url + "/")
    row = page.locator("#pairs tbody tr").first
    assert "no measurable gain: 2.13× in 1 repeat" in row.inner_text()
    assert row.locator("span.win").count() == 0  # not drawn as a gain
    assert "Qwen2.5-Coder-1.5B-Instruct" in row.inner_text()
    options = page.locator("select[name=verdict] option")
    assert [options.nth(i).get_attribute("value") for i in range(options.count())] == list(VERDICTS)
    shot(page, "trust-01-table-one-repeat")

    page.select_option("select[name=verdict]", "adaptable")
    page.locator("#filters button, #filters input[type=submit]").first.click()
    page.wait_for_url("**verdict=adaptable**")
    text = page.inner_text("#pairs")
    assert text.count("adaptable: 7 special tokens, BOS") == 2 and "DeepSeek" in text
    shot(page, "trust-02-adaptable-filter")

    page.goto(live_server.url + "/?verdict=any&q=DeepSeek-R1")
    assert page.locator("#pairs tbody tr").count() == 3  # R1 with the two Qwen drafts and the unadaptable one
    page.goto(live_server.url + "/?verdict=adaptible")
    assert "verdict: expected one of" in page.inner_text("body")

    page.goto(live_server.url + good.get_absolute_url())
    rec = page.inner_text("#recommendation")
    assert "No measurable gain" in rec and "1 repeat" in rec and "-md" not in page.inner_text("#server-command")
    shot(page, "trust-03-pair-no-headline")

    page.goto(live_server.url + files["r1"].get_absolute_url())
    section = page.inner_text("#drafts")
    assert "Adaptable drafts" in section and "7 special tokens, BOS" in section
    shot(page, "trust-04-r1-model-adaptable-drafts")


def test_header_only_files_show_the_bigger_model_as_the_target(page, live_server, bare):
    reg(bare["q05"], "someone/Coder-0.5B-header", "q05.gguf", finished=True)
    reg(bare["r1"], "someone/R1-Distill-7B-header", "r1.gguf", finished=True)
    page.goto(live_server.url + "/?verdict=any")
    row = page.locator("#pairs tbody tr").first
    target, draft = row.locator("td").nth(0).inner_text(), row.locator("td").nth(1).inner_text()
    assert "DeepSeek-R1-Distill-Qwen-7B" in target and "≈7B" in target
    assert "Qwen2.5-Coder-0.5B-Instruct" in draft and "≈500M" in draft
    assert row.locator("td").nth(2).inner_text() == "14.0×"
    shot(page, "trust-05-header-only-oriented")
