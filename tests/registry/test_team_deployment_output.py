"""The deployment command prints what people and servers supplied with control characters escaped."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from registry.team import telemetry

pytestmark = pytest.mark.django_db
RAW = ("\x1b", "\r", "\x07", "\u202e")


def out_of(*args) -> str:
    out = io.StringIO()
    call_command("deployment", *args, stdout=out)
    return out.getvalue()


def test_host_author_url_and_scrape_errors_cannot_drive_the_terminal(pair, monkeypatch):
    added = out_of(
        "add",
        "--target",
        str(pair.target.pk),
        "--draft",
        str(pair.draft.pk),
        "--method",
        "draft-simple",
        "--command",
        "llama-server -m t.gguf",
        "--host",
        "gpu\x1b[2J01",
        "--author",
        "ops\rroot",
        "--url",
        "http://127.0.0.1:9/\u202e",
    )
    listing = out_of("list")

    def fetch(url: str, **_) -> str:
        raise telemetry.ScrapeError(f"{url}: answered \x1b]0;pwned\x07")

    monkeypatch.setattr(telemetry, "fetch", fetch)
    scraped = out_of("scrape")
    for out in (added, listing, scraped):  # was: printed raw
        assert not any(c in out for c in RAW), out
    assert "gpu\\x1b[2J01" in added and "ops\\x0droot" in listing and "\\u202e" in listing
    # What the server answered is not even stored (a gap keeps a reason of specreg's words only).
    assert "gap (scrape failed)" in scraped and "pwned" not in scraped
