"""In headless Chromium at 1366 px: a run of the target alone reads as one thing (its title, a setting that drafted
nothing, K only where it applies, the prediction that drafted where the measurement did not, no stale progress), and
the pair page's measured table names each figure's method."""

from __future__ import annotations

import pytest

from registry.models import BenchmarkResult
from registry.results.figures import refresh_best
from tests.browser.chromium import ARTIFACTS, shot
from tests.runs import alone_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_run_of_the_target_alone_in_the_browser(live_server, page, smollm2_path):
    run = alone_run(smollm2_path)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    what = page.inner_text("#run-what")
    assert what.startswith("SmolLM2-135M-Instruct.Q4_1.gguf alone (n-gram)") and "drafting for" not in what
    assert "K 4" not in page.inner_text("#run-settings")
    assert "spec run" not in page.inner_text("dl.facts") and page.locator("#run-progress").count() == 0
    nothing = page.locator("td.nothing")
    assert "101.9 t/s is the target's own speed" in nothing.inner_text()
    assert "the n-gram table found no match" in nothing.inner_text()
    assert "Predicted 24 drafted (24 accepted), measured 0" in page.inner_text("tr.apart")
    # the results table stays inside its card at 1366 px
    card = page.locator("table.results").first.evaluate(
        "t => [t.getBoundingClientRect().right, t.closest('.card').getBoundingClientRect().right]"
    )
    assert card[0] <= card[1] + 1, card
    shot(page, "40-run-of-the-target-alone")

    BenchmarkResult.objects.filter(run=run).update(speculation_ran=True, drafted=10, speedup=1.1, acceptance=0.5)
    refresh_best(run.pair)
    page.goto(f"{live_server.url}{run.pair.get_absolute_url()}")
    table = page.locator("table.figures").first
    assert table.locator("th").nth(1).inner_text() == "Method"
    assert "ngram-mod" in table.locator("tbody tr").first.inner_text()
    runs = page.locator("table.runs").first
    assert runs.locator("tbody td").nth(6).inner_text() == "–"  # K: the run's n-gram method ignores it
    shot(page, "41-pair-measured-table-with-methods")
    page.locator("section.card", has=table).screenshot(path=str(ARTIFACTS / "42-pair-measured-card.png"))
