"""A crawl whose Hub listing fails: a hostile Link header, any error of the listing, a worker that keeps dying on a
listing or a repository. Each test reproduces the attack, scaled to stay fast: the crawl fails in one line, frees its
place, and gives up after the setting's attempts.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry.hub import crawl as crawls
from registry.models import (
    Crawl,
    CrawlRepo,
    HostSlot,
)
from tests.hub_repos import ORG, REPOS

pytestmark = [pytest.mark.django_db]


def _held_slots() -> int:
    return HostSlot.objects.exclude(holder="").count()


@pytest.mark.parametrize(
    "link",
    [
        '<http://127.0.0.1:+19151/api/models?cursor=1>; rel="next"',  # urlsplit reads it; .port raises
        '<http://[evil/api/models?cursor=1>; rel="next"',  # urljoin raises
    ],
)
def test_a_hostile_link_header_fails_the_crawl_in_one_line_and_frees_its_place(team_hub, settings, monkeypatch, link):
    settings.SPECREG_MAX_ACTIVE_CRAWLS = 1
    team_hub.link_header = link
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


def test_any_error_of_the_listing_fails_the_crawl_in_one_line(team_hub, monkeypatch):
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


def test_a_listing_whose_worker_keeps_dying_is_given_up(team_hub, settings, monkeypatch):
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


def test_a_listing_that_moves_again_forgets_the_attempts_that_died(team_hub, monkeypatch):
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


def test_a_repository_whose_worker_keeps_dying_is_given_up_after_the_setting(team_hub, settings, monkeypatch):
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
