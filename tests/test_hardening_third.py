"""Hardening: a soak's duration that backtracks, a knowledge base whose setting options
break pages, a Hub listing whose Link header leaves a crawl stuck.

Each test reproduces the attack, scaled to stay fast, and shows it held.
"""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from inspector.llama_flags import LlamaCppError, pinned_server_capabilities
from inspector.spec_flags import Setting, spec_flags
from registry.hub import crawl as crawls
from registry.kb.importer import KBError, import_kb
from registry.models import (
    BenchmarkResult,
    BenchmarkRun,
    Crawl,
    CrawlRepo,
    HostSlot,
    PredictedResult,
    StabilityResult,
)
from registry.results.figures import refresh_best, refresh_predicted
from registry.team.models import Deployment
from runner.errors import BenchmarkError
from runner.llama import output as parse
from runner.soak import targets as soaking
from runner.soak.targets import parse_duration
from runner.web.forms import BenchmarkForm
from tests.test_registry_crawl import ORG, REPOS, hub  # noqa: F401 - fixture
from tests.test_registry_kb import a_doc, counts, empty_installation, infos, kb_a  # noqa: F401 - fixtures
from tests.test_soak_targets import measured
from tests.test_team_notes import pair  # noqa: F401 - fixture (on the infos above: theirs and more)

pytestmark = [pytest.mark.django_db]

LONG = "1" + " " * 20_000 + "x"  # two \s* around an optional unit: 4 s of a web worker; 200,000 spaces, 185 s


# --- 1: a soak's duration ---------------------------------------------------------------------------------------


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


def test_a_long_duration_through_the_soak_buttons_is_refused_at_once(pair, settings, monkeypatch):  # noqa: F811
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


# --- 2: a knowledge base's setting options ------------------------------------------------------------------


def _soak_record(method: str, options: list) -> dict:
    return {
        "k": 8, "method": method, "options": options, "planned_s": 600, "status": "stable", "verdict": "stable",
        "clients": 1, "parallel": 1, "interval_s": 60, "intervals": [],
    }  # fmt: skip


def test_a_knowledge_base_with_malformed_or_foreign_options_is_refused_in_one_line(kb_a, tmp_path, settings):  # noqa: F811
    settings.SPECREG_INSTALLATION_ID = "installation-a"
    doc = a_doc(kb_a)
    empty_installation(settings, "installation-b")
    before = counts()
    at = next(i for i, r in enumerate(doc["runs"]) if r["predictions"])

    def refused(mutate, expected: str) -> None:
        d = json.loads(json.dumps(doc))
        mutate(d["runs"][at])
        (tmp_path / "kb.json").write_text(json.dumps(d))
        with pytest.raises(KBError, match=expected) as exc:
            import_kb(tmp_path / "kb.json")
        assert "\n" not in str(exc.value)
        assert counts() == before and not StabilityResult.objects.exists()

    def soak(method: str, options: list):
        return lambda run: run.update(stability=[_soak_record(method, options)])

    def predicted(options: list):
        return lambda run: run["predictions"][0].update(options=options)

    short = r"\.options\.0: List should have at least 2 items after validation, not "
    refused(soak("ngram-mod", [["--spec-x"]]), rf"runs\.{at}\.stability\.0{short}1")
    refused(soak("ngram-mod", [[]]), rf"runs\.{at}\.stability\.0{short}0")
    refused(predicted([["--spec-x"]]), rf"runs\.{at}\.predictions\.0{short}1")
    refused(predicted([[]]), rf"runs\.{at}\.predictions\.0{short}0")
    refused(soak("ngram-mod", [["--spec-x", "1"]]), "ngram-mod takes only --spec-ngram-mod-n-match with a number")
    refused(soak("ngram-mod", [["--spec-ngram-mod-n-match", "16;sh"]]), "ngram-mod takes only")
    refused(soak("ngram-mod", [["--spec-ngram-mod-n-match", 16]]), "Input should be a valid string")
    refused(predicted([["--spec-ngram-mod-n-match", "16"]]), "draft-simple takes no options")

    # The options specreg's runs write still come in.
    d = json.loads(json.dumps(doc))
    soak("ngram-mod", [["--spec-ngram-mod-n-match", "16"]])(d["runs"][at])
    (tmp_path / "kb.json").write_text(json.dumps(d))
    import_kb(tmp_path / "kb.json")
    assert StabilityResult.objects.get().options == [["--spec-ngram-mod-n-match", "16"]]


@pytest.mark.parametrize("bad", [[["--spec-x"]], [[]]])
def test_rows_stored_with_malformed_options_still_render(pair, bad):  # noqa: F811
    """Rows an older import let in (or written by hand): the pages, the API and the soak's run page answer."""
    run = BenchmarkRun.objects.create(
        pair=pair, queue="bench.x", status="done",
        params={"mode": "soak", "soak": {"method": "ngram-mod", "k": 8, "options": bad, "duration_s": 60,
                                         "clients": 1, "interval_s": 60, "basis": "imported"}},
    )  # fmt: skip
    figures = {"pair": pair, "run": run, "k": 8, "method": "ngram-mod", "options": bad, "content_type": "code"}
    BenchmarkResult.objects.create(
        **figures, speedup=1.3, acceptance=0.8, tokens_per_second=30.0, baseline_tokens_per_second=25.0,
        n_predict=64, repeats=1, n_prompts=2, status="ok", hardware="cpu", llama_cpp_build="b1",
    )  # fmt: skip
    PredictedResult.objects.create(
        **figures, speedup=1.4, acceptance=0.8, n_predict=64, n_prompts=2, task_set="default",
        hardware_class="cpu", hardware="cpu", llama_cpp_build="b1",
    )  # fmt: skip
    StabilityResult.objects.create(
        pair=pair, run=run, k=8, method="ngram-mod", options=bad, clients=1, parallel=1, planned_s=60,
        status="stable", verdict="stable for 1 min",
    )  # fmt: skip
    refresh_predicted(pair)
    refresh_best(pair)
    c = Client()
    for url in (f"/pairs/{pair.pk}/", f"/api/pairs/{pair.pk}", f"/runs/{run.pk}/", f"/api/runs/{run.pk}", "/"):
        assert c.get(url).status_code == 200, url
    setting = Setting("ngram-mod", 8, None, tuple(tuple(o) for o in bad))
    assert setting.label == "ngram-mod K=8 (malformed option)"
    with pytest.raises(LlamaCppError, match="not a \\(flag, value\\) pair"):
        spec_flags(pinned_server_capabilities(), setting)  # never an argv


# --- 3: a crawl whose listing fails -------------------------------------------------------------------------


def _held_slots() -> int:
    return HostSlot.objects.exclude(holder="").count()


@pytest.mark.parametrize(
    "link",
    [
        '<http://127.0.0.1:+19151/api/models?cursor=1>; rel="next"',  # urlsplit reads it; .port raises
        '<http://[evil/api/models?cursor=1>; rel="next"',  # urljoin raises
    ],
)
def test_a_hostile_link_header_fails_the_crawl_in_one_line_and_frees_its_place(hub, settings, monkeypatch, link):  # noqa: F811
    settings.SPECREG_MAX_ACTIVE_CRAWLS = 1
    hub.link_header = link
    sent: list[int] = []
    monkeypatch.setattr(crawls, "_send_list", sent.append)
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    assert crawls.list_step(crawl.pk, send=False) == Crawl.FAILED
    crawl.refresh_from_db()
    assert crawl.status == Crawl.FAILED and crawl.list_lease_until is None and crawl.finished_at is not None
    assert "\n" not in crawl.error and "is no address" in crawl.error and f"--resume {crawl.pk}" in crawl.error
    assert _held_slots() == 0
    crawls.sweep()
    assert sent == []  # nothing sends the listing again
    crawls.start(Crawl.AUTHOR, "another")  # its place among SPECREG_MAX_ACTIVE_CRAWLS is free


def test_any_error_of_the_listing_fails_the_crawl_in_one_line(hub, monkeypatch):  # noqa: F811
    def broken(*args, **kwargs):
        raise RuntimeError("a bug\non two lines")

    monkeypatch.setattr(crawls, "list_models_page", broken)
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    assert crawls.list_step(crawl.pk, send=False) == Crawl.FAILED
    crawl.refresh_from_db()
    assert crawl.error.startswith("the listing stopped: internal error: RuntimeError: a bug on two lines")
    assert crawl.list_lease_until is None and "\n" not in crawl.error


class WorkerKilled(BaseException):
    """What a killed worker leaves: the step ended where it stood, nothing after it ran."""


def test_a_listing_whose_worker_keeps_dying_is_given_up(hub, settings, monkeypatch):  # noqa: F811
    settings.SPECREG_CRAWL_STEP_ATTEMPTS = 3
    sent: list[int] = []
    monkeypatch.setattr(crawls, "_send_list", sent.append)
    tried: list[int] = []

    def dies(crawl, send):
        tried.append(crawl.pk)
        raise WorkerKilled

    monkeypatch.setattr(crawls, "_list_page", dies)
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    for attempt in range(1, 4):
        with pytest.raises(WorkerKilled):
            crawls.list_step(crawl.pk, send=False)
        crawl.refresh_from_db()
        assert crawl.status == Crawl.RUNNING and crawl.list_lease_until is not None  # claimed, as a kill leaves it
        if attempt > 1:
            assert crawl.error.startswith(f"listing attempt {attempt - 1} of 3 stopped")
        Crawl.objects.filter(pk=crawl.pk).update(list_lease_until=timezone.now() - timedelta(seconds=1))
        sent.clear()
        crawls.sweep()
        assert sent == [crawl.pk]  # the lease ran out: handed out again
    assert crawls.list_step(crawl.pk, send=False) == Crawl.FAILED
    crawl.refresh_from_db()
    assert len(tried) == 3 and crawl.list_lease_until is None
    assert crawl.error.startswith("the listing was given up after 3 attempts") and "\n" not in crawl.error
    sent.clear()
    crawls.sweep()
    assert sent == []


def test_a_listing_that_moves_again_forgets_the_attempts_that_died(hub, monkeypatch):  # noqa: F811
    def dies(crawl, send):
        raise WorkerKilled

    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    with monkeypatch.context() as m:
        m.setattr(crawls, "_list_page", dies)
        with pytest.raises(WorkerKilled):
            crawls.list_step(crawl.pk, send=False)
    Crawl.objects.filter(pk=crawl.pk).update(list_lease_until=timezone.now() - timedelta(seconds=1))
    assert crawls.list_step(crawl.pk, send=False) == Crawl.RUNNING  # listed; its repositories wait
    crawl.refresh_from_db()
    assert crawl.listed and crawl.error == "" and crawl.repos.count() == len(REPOS)


def test_a_repository_whose_worker_keeps_dying_is_given_up_after_the_setting(hub, settings, monkeypatch):  # noqa: F811
    settings.SPECREG_CRAWL_STEP_ATTEMPTS = 2
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    crawls.list_step(crawl.pk, send=False)
    row = CrawlRepo.objects.get(repo_id=REPOS[0])

    def dies(*args, **kwargs):
        raise WorkerKilled

    monkeypatch.setattr(crawls, "import_hf", dies)
    for _ in range(2):
        with pytest.raises(WorkerKilled):
            crawls.repo_step(row.pk)
        assert _held_slots() == 0
        CrawlRepo.objects.filter(pk=row.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert crawls.repo_step(row.pk) == CrawlRepo.FAILED
    assert CrawlRepo.objects.get(pk=row.pk).message.startswith("given up after 2 attempts")
