"""A crawl through a real broker to a real Celery worker (threads, as serve starts it), killed midway and resumed."""

from __future__ import annotations

import uuid

import pytest

from registry.hub import crawl as crawls
from registry.models import Crawl, CrawlRepo, GGUFFile, HostSlot
from runner.models import workers_on
from tests.hub_repos import ORG, REPOS
from tests.worker import Worker, wait_for

pytestmark = pytest.mark.broker


@pytest.fixture
def crawl_worker(team_hub, transactional_db, settings, monkeypatch):  # team_hub first: the worker inherits HF_ENDPOINT
    prefix = f"t{uuid.uuid4().hex[:8]}."
    settings.SPECREG_QUEUE_PREFIX = prefix
    for name, value in {"SPECREG_CRAWL_LEASE_SECONDS": 4, "SPECREG_CRAWL_PER_HOST": 2}.items():
        monkeypatch.setenv(name, str(value))
        setattr(settings, name, value)
    worker = Worker(prefix, "cpu-test", queues=f"{prefix}crawl", pool="threads", concurrency=4)
    worker.start()
    wait_for(lambda: workers_on(f"{prefix}crawl"), 60, "the crawl worker to record its queue", worker)
    try:
        yield worker
    finally:
        worker.stop()


def done(crawl_id: int) -> Crawl | None:
    c = Crawl.objects.get(pk=crawl_id)
    return c if c.finished else None


def test_a_worker_crawls_an_author_one_task_per_repository(team_hub, crawl_worker):
    crawl = crawls.start(Crawl.AUTHOR, ORG)
    crawl = wait_for(lambda: done(crawl.pk), 120, "the crawl", crawl_worker)
    assert crawl.status == "done", crawl.error
    assert sorted(CrawlRepo.objects.filter(status="done").values_list("repo_id", flat=True)) == REPOS
    assert GGUFFile.objects.count() == 10
    host = team_hub.url.split("//", 1)[1]
    slots = HostSlot.objects.filter(host=host)
    assert slots.count() == 2 and not slots.exclude(holder="").exists()  # two places for the host, both given back


def test_a_killed_worker_does_not_lose_or_repeat_a_repository(team_hub, crawl_worker, settings):
    team_hub.latency_seconds = 0.3  # each repository takes a couple of seconds: the kill lands in the middle
    crawl = crawls.start(Crawl.AUTHOR, ORG)
    wait_for(lambda: CrawlRepo.objects.filter(status="done").exists(), 120, "a first repository", crawl_worker)
    crawl_worker.kill()
    left = CrawlRepo.objects.exclude(status="done").count()
    assert left > 0, "the crawl finished before the kill"
    interrupted = list(CrawlRepo.objects.filter(status="running").values_list("pk", flat=True))

    replacement = Worker(
        crawl_worker.prefix, "cpu-test", queues=f"{crawl_worker.prefix}crawl", pool="threads", concurrency=4
    )
    replacement.start()
    try:
        # What the beat's sweep does every minute: hand out again what the dead worker held, once its lease ran out.
        wait_for(lambda: crawls.sweep() >= 0 and done(crawl.pk), 120, "the crawl to finish after the kill", replacement)
    finally:
        replacement.stop()
    crawl.refresh_from_db()
    assert crawl.status == "done", crawl.error
    assert set(CrawlRepo.objects.values_list("status", flat=True)) == {"done"}
    assert GGUFFile.objects.count() == 10 and GGUFFile.objects.values("source").distinct().count() == 10
    assert all(a >= 2 for a in CrawlRepo.objects.filter(pk__in=interrupted).values_list("attempts", flat=True))
