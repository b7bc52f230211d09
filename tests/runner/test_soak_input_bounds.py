"""A soak's duration and the other free text of the benchmark forms: long input is refused before it is read, and
what is read is read in one pass (a pattern that backtracks would hold a web worker)."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from registry.models import BenchmarkRun
from registry.team.models import Deployment
from runner.errors import BenchmarkError
from runner.llama import output as parse
from runner.soak import targets as soaking
from runner.soak.targets import parse_duration
from runner.web.forms import BenchmarkForm
from tests.runs import measured

pytestmark = [pytest.mark.django_db]


LONG = "1" + " " * 20_000 + "x"  # two \s* around an optional unit: 4 s of a web worker; 200,000 spaces, 185 s


class _ReadsCounted:
    """A compiled pattern that keeps every text it is asked to match (``soaking._DURATION`` in these tests)."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.texts = pattern, []

    def fullmatch(self, text: str) -> re.Match[str] | None:
        self.texts.append(text)
        return self.pattern.fullmatch(text)


def _count_duration_reads(monkeypatch) -> _ReadsCounted:
    reads = _ReadsCounted(soaking._DURATION)
    monkeypatch.setattr(soaking, "_DURATION", reads)
    return reads


def test_the_duration_parser_refuses_long_input_before_reading_it_and_its_pattern_is_linear(monkeypatch):
    pattern = soaking._DURATION
    reads = _count_duration_reads(monkeypatch)
    with pytest.raises(BenchmarkError, match="a duration is at most 16 characters"):
        parse_duration(LONG)
    assert reads.texts == []  # refused before the pattern read it
    # The pattern itself, past the cap, reads 200,000 spaces in one pass: tens of milliseconds, where the old
    # one took minutes (185 s). The bound only tells a pass from a backtracking search, with room for any load.
    t0 = time.monotonic()
    assert pattern.fullmatch("1" + " " * 200_000 + "x") is None
    assert pattern.fullmatch("1" * 200_000 + "x") is None
    assert time.monotonic() - t0 < 10
    assert [parse_duration(t) for t in ("90", " 90 s ", "30m", "1.5 h", "2 HOURS", "1\th")] == [
        90,
        90,
        1800,
        5400,
        7200,
        3600,
    ]
    with pytest.raises(BenchmarkError, match="is not one"):
        parse_duration("1 x")


def test_a_long_duration_through_the_soak_buttons_is_refused_at_once(pair, settings, monkeypatch):
    settings.SPECREG_QUEUE_PREFIX = "nobody."
    reads = _count_duration_reads(monkeypatch)
    measured(pair, 4, 1.2)  # a setting to soak: only the duration stands in the way
    dep = Deployment.objects.create(
        target=pair.target, draft=pair.draft, pair=pair, method="draft-simple", k=6, command="llama-server …",
        author_name="alice", deployed_at=timezone.now(),
    )  # fmt: skip
    c = Client()
    c.force_login(User.objects.create_user("alice", password="pw-alice-123456"))
    for url in (f"/pairs/{pair.pk}/soak", f"/deployments/{dep.pk}/soak"):
        r = c.post(url, {"duration": LONG, "clients": "1"}, follow=True)
        page = r.content.decode()
        assert r.redirect_chain and "a duration is at most 16 characters" in page
    assert not BenchmarkRun.objects.filter(params__mode="soak").exists()
    r = c.post(f"/api/pairs/{pair.pk}/soak", {"duration": LONG}, content_type="application/json")
    assert r.status_code == 400 and not BenchmarkRun.objects.filter(params__mode="soak").exists()
    assert reads.texts == []  # at once: no pattern read the 20,000 characters, on either page or the API
    # what the buttons send still queues
    assert c.post(f"/pairs/{pair.pk}/soak", {"duration": "10m", "clients": "1"}).status_code == 302
    assert BenchmarkRun.objects.get(params__mode="soak").params["soak"]["duration_s"] == 600


def test_the_other_free_text_is_bounded_or_read_in_one_pass():
    # The benchmark form's K and temperature lists stop at 200 characters.
    form = BenchmarkForm(
        {"ks": "4," * 5_000, "temperatures": "0", "repeats": 1, "n_predict": 64, "prompts_per_type": 1}
    )
    assert not form.is_valid() and "ks" in form.errors
    # llama.cpp's output holds the model's text: "accept = " and 20,000 digits took 13 s to search, so ten
    # times as many would take twenty minutes; one pass reads them in milliseconds. The bound only tells
    # the two apart, with room for any load.
    t0 = time.monotonic()
    assert parse._ACCEPT.search("accept = " + "1" * 200_000 + "x") is None
    assert time.monotonic() - t0 < 10
    assert parse._ACCEPT.search("accept = 71.250%").group(1) == "71.250"
