"""In headless Chromium: a row "partial: N of M draft quants" and its pair page, each side's files by class."""

from __future__ import annotations

import pytest

from registry.models import Pair
from tests.browser.chromium import shot
from tests.ggufgen import vocab
from tests.registering import BIG, CARD, SMALL, other_text, reg, synth

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_partial_row_and_its_pair_page(page, live_server, tmp_path):
    reg(synth(tmp_path, "big", tensors=BIG), "Org/Big-7B-GGUF", "big-Q4_K_M.gguf", base_models=["Org/Big-7B"])
    plain = reg(synth(tmp_path, "small", tensors=SMALL), "Org/Small-0.5B-GGUF", "small-Q4_K_M.gguf", base_models=CARD)
    reg(
        synth(tmp_path, "pad", vocab(5129), tensors=SMALL), "Org/Small-0.5B-GGUF", "small-padded.gguf", base_models=CARD
    )
    reg(
        synth(tmp_path, "txt", other_text(3000), tensors=SMALL),
        "Org/Small-0.5B-GGUF",
        "small-other-text.gguf",
        base_models=CARD,
    )
    page.goto(f"{live_server.url}/?verdict=partial")
    page.wait_for_selector("#pairs")
    rows = page.locator("#pairs tbody tr")
    assert rows.count() == 1
    assert "partial: 1 of 3 draft quants" in rows.first.inner_text()
    assert page.locator("select[name=verdict]").input_value() == "partial"
    shot(page, "30-table-partial")
    page.click("#pairs a.pair-link")
    page.wait_for_selector("#classes")
    text = page.inner_text("#classes")
    assert "Compatible for some quants only." in text
    assert "fails vocab_size" in text and "fails token_text" in text and "compatible" in text
    # The pair's default files are the publisher's compatible quant.
    assert Pair.objects.get().draft_id == plain.pk
    assert "small-Q4_K_M" in page.inner_text("dl.facts")
    shot(page, "31-pair-classes")
