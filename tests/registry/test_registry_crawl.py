"""Crawls of the Hub (import_hf --author/--search): the paged listing, one import per repository, places per host,
resuming after a killed worker, the crawl pages; through the real huggingface_hub client and the local test Hub."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from inspector.hub_api import list_models_page
from inspector.management.base import UserError
from inspector.sources import SourceError
from registry.hub import crawl as crawls
from registry.hub.host_slots import host_slot
from registry.models import Crawl, CrawlRepo, GGUFFile, HostSlot
from tests.hub_repos import ORG, REPOS

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def run(*args: str) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command(*args, stdout=out)
    except SystemExit as exc:
        return out.getvalue(), int(exc.code or 0)
    return out.getvalue(), 0


def listing_requests(team_hub) -> list[str]:
    return [r.path for r in team_hub.requests if r.path.startswith("/api/models?")]


def test_the_listing_is_paged_by_the_hubs_cursor(team_hub):
    first = list_models_page(author=ORG, filter="gguf")
    assert [m["id"] for m in first.models] == REPOS[:2] and first.next_url and "cursor=2" in first.next_url
    ids = [m["id"] for m in first.models]
    page = first
    while page.next_url:
        page = list_models_page(page.next_url)
        ids += [m["id"] for m in page.models]
    assert ids == REPOS  # not the other author's, not the repository without GGUF


def test_a_next_page_on_another_host_is_not_followed():
    with pytest.raises(SourceError, match="another host"):
        list_models_page("http://attacker.example/api/models?cursor=2")


def test_a_crawl_here_imports_every_repository_of_the_author(team_hub):
    out, code = run("import_hf", "--author", ORG, "--here")
    assert code == 0, out
    crawl = Crawl.objects.get()
    assert crawl.status == Crawl.DONE and crawl.listed and crawl.next_url == ""
    assert sorted(CrawlRepo.objects.values_list("repo_id", flat=True)) == REPOS
    assert set(CrawlRepo.objects.values_list("status", flat=True)) == {"done"}
    assert GGUFFile.objects.count() == 10 and not GGUFFile.objects.filter(repo="other/Model-GGUF").exists()
    assert "10 added" in out.splitlines()[-1] and "5/5 repositories" in out
    assert len(listing_requests(team_hub)) == 3  # 5 models, 2 a page


def test_a_second_crawl_reads_no_header_again(team_hub):
    run("import_hf", "--author", ORG, "--here")
    team_hub.reset_counts()
    out, code = run("import_hf", "--author", ORG, "--here")
    assert code == 0 and "10 unchanged" in out.splitlines()[-1]
    assert sum(team_hub.bytes_served(r, p) for r in REPOS for p in team_hub.repos[r].files) == 0


def test_search_and_max_repos(team_hub):
    out, code = run("import_hf", "--search", "model3", "--here")
    assert code == 0 and list(CrawlRepo.objects.values_list("repo_id", flat=True)) == [REPOS[3]]
    out, code = run("import_hf", "--author", ORG, "--max-repos", "3", "--here")
    crawl = Crawl.objects.get(by="author")
    assert crawl.repos.count() == 3 and crawl.listed and crawl.status == "done"
    assert len([p for p in listing_requests(team_hub) if "author=" in p]) == 2  # it stopped listing at three


def test_a_broken_file_fails_alone_and_the_exit_status_says_so(team_hub, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    team_hub.repos[REPOS[1]].files["model1-broken.gguf"] = bad
    out, code = run("import_hf", "--author", ORG, "--here")
    assert code == 1
    row = CrawlRepo.objects.get(repo_id=REPOS[1])
    assert row.status == "done" and row.added == 2 and row.failed_files == 1 and "model1-broken.gguf" in row.message
    assert GGUFFile.objects.count() == 10 and "Traceback" not in out


def test_a_killed_worker_leaves_work_that_resume_takes_up(team_hub, settings):
    """As a SIGKILL leaves it: a repository claimed (its lease still running out), the listing half read."""
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    crawl.refresh_from_db()
    crawls._list_page(crawl, send=False)  # the first page only, as if killed after it
    first = CrawlRepo.objects.get(repo_id=REPOS[0])
    CrawlRepo.objects.filter(pk=first.pk).update(
        status="running", attempts=1, lease_until=timezone.now() + timedelta(minutes=5)
    )
    Crawl.objects.filter(pk=crawl.pk).update(status="running", list_lease_until=timezone.now() - timedelta(seconds=1))
    team_hub.reset_counts()

    assert crawls.repo_step(first.pk) == "busy"  # its lease has not run out: nobody else takes it yet
    CrawlRepo.objects.filter(pk=first.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    out, code = run("import_hf", "--resume", str(crawl.pk), "--here")
    assert code == 0, out
    assert Crawl.objects.get().status == "done" and CrawlRepo.objects.count() == 5
    assert CrawlRepo.objects.get(pk=first.pk).attempts == 2
    pages = listing_requests(team_hub)
    assert pages and all("cursor=" in p for p in pages)  # the listing went on from its cursor, not from the start
    assert GGUFFile.objects.count() == 10


def test_a_repository_given_up_after_its_worker_died_too_often(team_hub):
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    crawls.list_step(crawl.pk, send=False)
    row = CrawlRepo.objects.get(repo_id=REPOS[0])
    CrawlRepo.objects.filter(pk=row.pk).update(
        status="running", attempts=crawls.step_attempts(), lease_until=timezone.now() - timedelta(seconds=1)
    )
    assert crawls.repo_step(row.pk) == "failed"
    assert "given up after 3 attempts" in CrawlRepo.objects.get(pk=row.pk).message


def test_at_most_the_places_for_a_host_read_it_at_once(team_hub, settings):
    settings.SPECREG_CRAWL_PER_HOST = 1
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    crawls.list_step(crawl.pk, send=False)
    row = CrawlRepo.objects.get(repo_id=REPOS[0])
    host = team_hub.url.split("//", 1)[1]
    with host_slot(host, "someone-else", 1, 60) as renew:
        assert renew is not None
        assert crawls.repo_step(row.pk) == "wait"
        row.refresh_from_db()
        assert row.status == "pending" and row.attempts == 0 and not GGUFFile.objects.exists()
        with host_slot(host, "a-third", 1, 60) as none:
            assert none is None
    assert crawls.repo_step(row.pk) == "done" and GGUFFile.objects.count() == 2
    HostSlot.objects.filter(host=host).update(holder="dead-worker", until=timezone.now() - timedelta(seconds=1))
    with host_slot(host, "after-expiry", 1, 60) as renew:
        assert renew is not None  # a holder that died frees its place when its time runs out


def test_a_hub_that_fails_the_listing_fails_the_crawl_with_a_way_on(team_hub):
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    crawl.refresh_from_db()
    crawls._list_page(crawl, send=False)
    bad = f"{team_hub.url}/api/models?author={ORG}&cursor=nonsense"
    Crawl.objects.filter(pk=crawl.pk).update(next_url=bad, list_lease_until=None)
    assert crawls.list_step(crawl.pk, send=False) == "failed"
    crawl.refresh_from_db()
    assert f"import_hf --resume {crawl.pk}" in crawl.error and "after 2 repositories" in crawl.error


def test_cancelled_crawls_start_nothing(team_hub):
    crawl = crawls.start(Crawl.AUTHOR, ORG, send=False)
    crawls.list_step(crawl.pk, send=False)
    out, _ = run("import_hf", "--cancel", str(crawl.pk))
    assert "cancelled" in out
    row = CrawlRepo.objects.first()
    assert crawls.repo_step(row.pk) == "cancelled" and not GGUFFile.objects.exists()
    with pytest.raises(UserError, match="already cancelled"):
        call_command("import_hf", "--cancel", str(crawl.pk))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--author", "../etc"], "not a Hub user or organisation name"),
        (["--author", ORG, "--max-repos", "0"], "--max-repos 0"),
        (["--search", ""], "1 to 200 printable characters"),
        ([f"{ORG}/x", "--author", ORG], "give one of"),
        (["--status", "999"], "no crawl 999"),
        (["--author", ORG, "--include", "*Q4*"], "apply to one repository"),
    ],
)
def test_bad_crawl_arguments_get_one_line(args, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        call_command("import_hf", *args)


def test_only_so_many_crawls_run_at_once(settings):
    settings.SPECREG_MAX_ACTIVE_CRAWLS = 1
    crawls.start(Crawl.AUTHOR, ORG)
    with pytest.raises(crawls.CrawlError, match="SPECREG_MAX_ACTIVE_CRAWLS"):
        crawls.start(Crawl.AUTHOR, "another")


def test_the_crawl_pages(team_hub, client, django_user_model):
    run("import_hf", "--author", ORG, "--here")
    crawl = Crawl.objects.get()
    page = client.get(f"/crawls/{crawl.pk}/")
    text = page.content.decode()
    assert page.status_code == 200 and "5 done" in text and "10 added" in text and REPOS[4] in text
    state = client.get(f"/api/crawls/{crawl.pk}").json()
    assert state["status"] == "done" and state["added"] == 10 and state["found"] == 5
    assert "crawl-cancel" not in text  # strangers may look, not change
    assert client.post(f"/crawls/{crawl.pk}/resume").status_code == 302  # to the login page
    listing = client.get("/crawls/")
    assert listing.status_code == 200 and "Only staff may start a crawl" in listing.content.decode()

    user = django_user_model.objects.create_user("u", password="p")
    client.force_login(user)
    assert client.post("/crawls/", {"by": "author", "query": ORG}).status_code == 403
    assert client.post(f"/crawls/{crawl.pk}/cancel").status_code == 403

    user.is_staff = True
    user.save()
    answer = client.post("/crawls/", {"by": "author", "query": "bad name!"})
    assert answer.status_code == 400 and "not a Hub user" in answer.content.decode()
    answer = client.post("/crawls/", {"by": "search", "query": "Model2", "max_repos": 1})
    new = Crawl.objects.get(by="search")
    assert answer.status_code == 302 and answer["Location"] == f"/crawls/{new.pk}/" and new.max_repos == 1
    assert new.requested_by == user and new.status == "queued"
    assert client.post(f"/crawls/{new.pk}/cancel").status_code == 303
    assert Crawl.objects.get(pk=new.pk).status == "cancelled"
