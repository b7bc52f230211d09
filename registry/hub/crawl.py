"""A crawl of the Hub: every GGUF repository of an author or a search, one task per repository.

``start`` records a Crawl and queues its listing; ``list_step`` pages through the Hub's model listing (filtered to
GGUF), keeping the Hub's cursor after every page and queueing one ``repo_step`` per repository found;
``repo_step`` imports one repository (``import_hf``: headers by Range requests, unchanged files skipped) within
a place of SPECREG_CRAWL_PER_HOST for the Hub's host. Both hold a lease that they renew while they work, so a
worker killed mid-way leaves work that ``sweep`` (the beat, every minute) or ``resume`` hands out again once the
lease has run out; nothing is imported twice (unchanged files cost one listing request). The Celery tasks
(registry.tasks) and ``import_hf --author/--search`` call these functions; ``run_here`` runs a crawl in this process.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, F, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from inspector.deadlines import header_deadline_seconds
from inspector.hf_spec import hub_host
from inspector.hub_api import list_models_page
from inspector.hub_names import hub_access
from inspector.sources import SourceError
from registry.access.policy import may_use_server_token
from registry.hub.host_slots import host_slot
from registry.hub.importing import HubImportError, HubUnreachable, JobDeadlinePassed, hub_job_deadline, import_hf
from registry.models import Crawl, CrawlRepo
from registry.queues import crawl_queue, listening_workers, send

WAIT_SECONDS = 3  # before a repository that found no place for its host tries again
AUTHOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")  # the Hub's user and organisation names
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
# What a running crawl's ``error`` says while its listing is tried again after a worker that died: the count kept
# there (Crawl has no field for it), cleared by the next page listed.
_LISTING_STOPPED = re.compile(r"listing attempt (\d{1,4}) of \d{1,4} stopped")


class CrawlError(Exception):
    """A crawl cannot be started, found or changed; one line."""


def step_attempts() -> int:
    """How often a step (a listing, a repository) is tried before it is given up (SPECREG_CRAWL_STEP_ATTEMPTS)."""
    return max(1, settings.SPECREG_CRAWL_STEP_ATTEMPTS)


def _one_line(text: str, limit: int = 2000) -> str:
    return " ".join(text.split())[:limit]


def lease() -> timedelta:
    """How long a claimed repository or listing stays claimed without news (SPECREG_CRAWL_LEASE_SECONDS): by
    default twice SPECREG_HEADER_DEADLINE_SECONDS, the most one header read takes, and half a minute; the lease
    is renewed after every file and every page."""
    seconds = settings.SPECREG_CRAWL_LEASE_SECONDS or 2 * header_deadline_seconds() + 30
    return timedelta(seconds=seconds)


def check_query(by: str, query: str, max_repos: int | None) -> tuple[str, int]:
    """The query as kept, and the repository limit; CrawlError for anything else."""
    query = (query or "").strip()
    if by == Crawl.AUTHOR and not AUTHOR.fullmatch(query):
        raise CrawlError(f"--author {query!r}: not a Hub user or organisation name")
    if by == Crawl.SEARCH and not (0 < len(query) <= 200 and query.isprintable()):
        raise CrawlError("--search: give 1 to 200 printable characters")
    if by not in (Crawl.AUTHOR, Crawl.SEARCH):
        raise CrawlError(f"unknown crawl kind {by!r}")
    most = settings.SPECREG_CRAWL_MAX_REPOS
    limit = most if max_repos is None else max_repos
    if not 0 < limit <= most:
        raise CrawlError(f"--max-repos {limit}: give 1 to {most} (SPECREG_CRAWL_MAX_REPOS)")
    return query, limit


def start(by: str, query: str, *, max_repos: int | None = None, user=None, send: bool = True) -> Crawl:
    """Record a crawl and (``send``) queue its listing for the crawl workers once the transaction commits."""
    query, limit = check_query(by, query, max_repos)
    with transaction.atomic():
        running = Crawl.objects.select_for_update().filter(status__in=(Crawl.QUEUED, Crawl.RUNNING))
        cap = settings.SPECREG_MAX_ACTIVE_CRAWLS
        if send and len(running) >= cap:
            raise CrawlError(f"{cap} crawl(s) are already running (SPECREG_MAX_ACTIVE_CRAWLS); cancel one or wait")
        crawl = Crawl.objects.create(
            by=by,
            query=query,
            max_repos=limit,
            queue=crawl_queue(),
            server_token=may_use_server_token(user) if user is not None else True,
            requested_by=user if getattr(user, "is_authenticated", False) else None,
        )
        if send:
            transaction.on_commit(lambda: _send_list(crawl.pk))
    return crawl


def _send_list(crawl_id: int) -> None:
    send("registry.tasks.crawl_list", crawl_id, crawl_queue())


def _send_repos(row_ids: list[int]) -> None:
    for pk in row_ids:
        send("registry.tasks.crawl_repo", pk, crawl_queue())


def list_step(crawl_id: int, *, send: bool = True) -> str:
    """Page through the crawl's listing from where it stopped, recording (and with ``send`` queueing) every
    repository found; returns the crawl's status, or "busy" when another worker holds the listing."""
    now = timezone.now()
    open_listing = Crawl.objects.filter(pk=crawl_id, listed=False, status__in=(Crawl.QUEUED, Crawl.RUNNING))
    claim = {"status": Crawl.RUNNING, "list_lease_until": now + lease(), "started_at": Coalesce(F("started_at"), now)}
    # A lease that ran out is an attempt that never ended (its worker was killed, or died): counted, so that a
    # listing that keeps dying is given up rather than sent again at every sweep, holding its crawl's place.
    if open_listing.filter(list_lease_until=None).update(**claim):
        stopped = 0
    elif open_listing.filter(list_lease_until__lt=now).update(**claim):
        stopped = _listing_attempts(Crawl.objects.values_list("error", flat=True).get(pk=crawl_id)) + 1
    else:
        return "busy"
    most = step_attempts()
    if stopped >= most:
        return _list_failed(
            crawl_id, f"the listing was given up after {stopped} attempts whose worker stopped before they ended"
        )
    if stopped:
        Crawl.objects.filter(pk=crawl_id).update(
            error=f"listing attempt {stopped} of {most} stopped before it ended (its worker died); trying again"
        )
    crawl = Crawl.objects.get(pk=crawl_id)
    try:
        with hub_access(server_token=crawl.server_token), hub_job_deadline():
            while not crawl.listed:
                if Crawl.objects.filter(pk=crawl_id, status=Crawl.CANCELLED).exists():
                    return Crawl.CANCELLED
                _list_page(crawl, send)
    except (SourceError, HubImportError) as exc:
        return _list_failed(crawl_id, f"the listing stopped after {crawl.repos.count()} repositories: {exc}")
    except Exception as exc:  # a bug, or an answer nothing above expected: end the crawl, never leave it claimed
        return _list_failed(crawl_id, f"the listing stopped: internal error: {type(exc).__name__}: {exc}")
    Crawl.objects.filter(pk=crawl_id).update(list_lease_until=None)
    return finish_if_done(crawl_id)


def _listing_attempts(error: str) -> int:
    """The listing's attempts that stopped before they ended, as a running crawl's ``error`` counts them."""
    m = _LISTING_STOPPED.match(error or "")
    return int(m.group(1)) if m else 0


def _list_failed(crawl_id: int, why: str) -> str:
    """End the crawl as failed, in one line, its listing free: it no longer counts among the running crawls."""
    error = _one_line(f"{why}; `python manage.py import_hf --resume {crawl_id}` goes on from there")
    Crawl.objects.filter(pk=crawl_id).update(
        status=Crawl.FAILED, error=error, list_lease_until=None, finished_at=timezone.now()
    )
    return Crawl.FAILED


def _list_page(crawl: Crawl, send: bool) -> None:
    found = crawl.repos.count()
    page = list_models_page(crawl.next_url or None, filter="gguf", **{crawl.by: crawl.query})
    # A hostile listing could name anything: only well-formed repository names are kept.
    names = list(dict.fromkeys(m["id"] for m in page.models if isinstance(m["id"], str) and REPO_ID.fullmatch(m["id"])))
    names = names[: max(0, crawl.max_repos - found)]
    crawl.next_url = page.next_url or ""
    crawl.listed = page.next_url is None or found + len(names) >= crawl.max_repos
    with transaction.atomic():
        CrawlRepo.objects.bulk_create([CrawlRepo(crawl=crawl, repo_id=n) for n in names], ignore_conflicts=True)
        Crawl.objects.filter(pk=crawl.pk).update(
            next_url=crawl.next_url, listed=crawl.listed, list_lease_until=timezone.now() + lease()
        )
        # A page listed: the listing moves again, so attempts whose worker died before are forgotten.
        Crawl.objects.filter(pk=crawl.pk, error__startswith="listing attempt ").update(error="")
    if send:
        ids = CrawlRepo.objects.filter(crawl=crawl, repo_id__in=names, status=CrawlRepo.PENDING)
        _send_repos(list(ids.values_list("pk", flat=True)))


def repo_step(row_id: int) -> str:
    """Import one repository of a crawl. Returns what became of it: done, failed, "wait" (every place for the
    Hub's host is taken: come back soon), "retry" (the Hub did not answer: come back later), "busy" (claimed
    elsewhere or finished), "cancelled" or "missing"."""
    row = CrawlRepo.objects.select_related("crawl").filter(pk=row_id).first()
    if row is None:
        return "missing"
    if row.crawl.status == Crawl.CANCELLED:
        return Crawl.CANCELLED
    now = timezone.now()
    claimable = Q(status=CrawlRepo.PENDING) | Q(status=CrawlRepo.RUNNING, lease_until__lt=now)
    if not CrawlRepo.objects.filter(claimable, pk=row_id).update(
        status=CrawlRepo.RUNNING, lease_until=now + lease(), attempts=F("attempts") + 1
    ):
        return "busy"
    row.refresh_from_db()
    most = step_attempts()
    if row.attempts > most:
        return _finish(row, CrawlRepo.FAILED, f"given up after {most} attempts ({row.message or 'the worker stopped'})")
    hold = lease().total_seconds()
    mine = CrawlRepo.objects.filter(pk=row_id)
    with host_slot(hub_host(), f"crawlrepo:{row_id}", settings.SPECREG_CRAWL_PER_HOST, hold) as renew:
        if renew is None:  # not an attempt: it never reached the Hub
            mine.update(status=CrawlRepo.PENDING, lease_until=None, attempts=F("attempts") - 1)
            return "wait"

        def progress(_outcome) -> None:
            renew()
            mine.update(lease_until=timezone.now() + lease())

        try:
            with hub_access(server_token=row.crawl.server_token), hub_job_deadline():
                report = import_hf(row.repo_id, progress=progress)
        except HubUnreachable as exc:  # the Hub's fault, not the repository's: again later
            mine.update(status=CrawlRepo.PENDING, lease_until=None, message=str(exc)[:300])
            return "retry"
        except JobDeadlinePassed as exc:
            _count(row, exc.report)
            return _finish(row, CrawlRepo.FAILED, str(exc))
        except HubImportError as exc:
            return _finish(row, CrawlRepo.FAILED, str(exc))
        except Exception as exc:  # a bug must end this repository, not leave it claimed
            return _finish(row, CrawlRepo.FAILED, f"internal error: {type(exc).__name__}: {exc}")
    _count(row, report)
    failed = report.failed
    message = f"{len(failed)} file(s) failed, e.g. {failed[0].path}: {failed[0].message}" if failed else ""
    return _finish(row, CrawlRepo.DONE, message)


def _count(row: CrawlRepo, report) -> None:
    if report is None:
        return
    row.added, row.updated = report.count("added"), report.count("updated")
    row.unchanged, row.failed_files = report.count("unchanged"), report.count("failed")
    row.pairs_added = sum(o.pairs_added for o in report.outcomes)


def _finish(row: CrawlRepo, status: str, message: str) -> str:
    CrawlRepo.objects.filter(pk=row.pk).update(
        status=status,
        lease_until=None,
        message=message[:300],
        finished_at=timezone.now(),
        added=row.added,
        updated=row.updated,
        unchanged=row.unchanged,
        failed_files=row.failed_files,
        pairs_added=row.pairs_added,
    )
    finish_if_done(row.crawl_id)
    return status


def finish_if_done(crawl_id: int) -> str:
    """Mark a running crawl done once it is listed and none of its repositories is left; returns its status."""
    open_rows = CrawlRepo.objects.filter(crawl_id=crawl_id, status__in=(CrawlRepo.PENDING, CrawlRepo.RUNNING))
    Crawl.objects.filter(pk=crawl_id, status=Crawl.RUNNING, listed=True).exclude(Exists(open_rows)).update(
        status=Crawl.DONE, finished_at=timezone.now()
    )
    return Crawl.objects.filter(pk=crawl_id).values_list("status", flat=True).first() or "missing"


def cancel(crawl_id: int) -> str:
    """Stop a crawl: no repository is started after this (one being imported finishes its current file)."""
    crawl = get(crawl_id)
    if crawl.finished:
        raise CrawlError(f"crawl {crawl_id} has already {crawl.status}")
    Crawl.objects.filter(pk=crawl_id).update(status=Crawl.CANCELLED, finished_at=timezone.now(), list_lease_until=None)
    return Crawl.CANCELLED


def resume(crawl_id: int, *, send: bool = True) -> int:
    """Take up a cancelled, failed or interrupted crawl where it stopped: its listing from the kept cursor,
    its repositories not yet done (those that failed too, once). Returns the repositories handed out."""
    crawl = get(crawl_id)
    now = timezone.now()
    rows = CrawlRepo.objects.filter(crawl=crawl).filter(
        Q(status=CrawlRepo.PENDING) | Q(status=CrawlRepo.RUNNING, lease_until__lt=now) | Q(status=CrawlRepo.FAILED)
    )
    rows.filter(status=CrawlRepo.FAILED).update(status=CrawlRepo.PENDING, attempts=0, finished_at=None)
    Crawl.objects.filter(pk=crawl_id).update(status=Crawl.RUNNING, error="", finished_at=None)
    ids = list(rows.values_list("pk", flat=True))
    if send:
        if not crawl.listed:
            _send_list(crawl_id)
        _send_repos(ids)
    finish_if_done(crawl_id)
    return len(ids)


def sweep() -> int:
    """Hand out again what killed workers left (the beat runs it every minute); returns the repositories handed out.

    Repositories whose lease has run out go again at once. A queued message can be lost with its worker (the
    filesystem broker forgets what a worker took; a retry waits in its worker's memory), so a running crawl in
    which nothing has moved for a whole lease, while a crawl worker listens, has all its waiting repositories
    sent again: a message that was not lost after all finds its repository taken and ends ("busy")."""
    now = timezone.now()
    quiet = now - lease()
    workers = listening_workers()
    listening = workers is None or bool(workers(crawl_queue()))
    handed = 0
    for crawl in Crawl.objects.filter(status__in=(Crawl.QUEUED, Crawl.RUNNING)):
        rows = CrawlRepo.objects.filter(crawl=crawl)
        expired = rows.filter(status=CrawlRepo.RUNNING, lease_until__lt=now)
        moving = rows.filter(Q(status=CrawlRepo.RUNNING, lease_until__gte=now) | Q(finished_at__gte=quiet)).exists()
        stalled = listening and not moving and (crawl.started_at or crawl.created_at) < quiet
        ids = list(
            (expired | rows.filter(status=CrawlRepo.PENDING) if stalled else expired).values_list("pk", flat=True)
        )
        _send_repos(ids)
        handed += len(ids)
        lost_listing = crawl.list_lease_until is None and crawl.created_at < quiet
        if not crawl.listed and (lost_listing or (crawl.list_lease_until is not None and crawl.list_lease_until < now)):
            _send_list(crawl.pk)
    return handed


def get(crawl_id: int) -> Crawl:
    crawl = Crawl.objects.filter(pk=crawl_id).first()
    if crawl is None:
        raise CrawlError(f"no crawl {crawl_id}")
    return crawl


@dataclass
class Progress:
    status: str
    listed: bool
    found: int
    pending: int
    running: int
    done: int
    failed: int
    added: int
    updated: int
    unchanged: int
    failed_files: int
    pairs_added: int
    files_per_hour: float | None
    eta_seconds: float | None

    @property
    def finished_repos(self) -> int:
        return self.done + self.failed

    def line(self) -> str:
        rate = f", {self.files_per_hour:,.0f} files/h" if self.files_per_hour else ""
        listing = "" if self.listed else " (listing)"
        return (
            f"{self.status}{listing}: {self.finished_repos}/{self.found} repositories ({self.failed} failed); "
            f"files {self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.failed_files} failed; {self.pairs_added} new pair(s){rate}"
        )


def progress(crawl: Crawl) -> Progress:
    """The crawl's counts in one aggregate over its repositories (an index on crawl and status)."""
    by_status = dict(
        CrawlRepo.objects.filter(crawl=crawl).values_list("status").annotate(n=Count("pk")).values_list("status", "n")
    )
    sums = CrawlRepo.objects.filter(crawl=crawl).aggregate(
        added=Coalesce(Sum("added"), 0),
        updated=Coalesce(Sum("updated"), 0),
        unchanged=Coalesce(Sum("unchanged"), 0),
        failed_files=Coalesce(Sum("failed_files"), 0),
        pairs_added=Coalesce(Sum("pairs_added"), 0),
    )
    found = sum(by_status.values())
    finished = by_status.get(CrawlRepo.DONE, 0) + by_status.get(CrawlRepo.FAILED, 0)
    files = sums["added"] + sums["updated"] + sums["unchanged"] + sums["failed_files"]
    rate = eta = None
    if crawl.started_at is not None and files:
        elapsed = ((crawl.finished_at or timezone.now()) - crawl.started_at).total_seconds()
        rate = files / elapsed * 3600 if elapsed > 0 else None
        if crawl.status == Crawl.RUNNING and crawl.listed and finished and elapsed > 0:
            eta = (found - finished) * elapsed / finished
    return Progress(
        status=crawl.status,
        listed=crawl.listed,
        found=found,
        pending=by_status.get(CrawlRepo.PENDING, 0),
        running=by_status.get(CrawlRepo.RUNNING, 0),
        done=by_status.get(CrawlRepo.DONE, 0),
        failed=by_status.get(CrawlRepo.FAILED, 0),
        files_per_hour=rate,
        eta_seconds=eta,
        **sums,
    )


def run_here(crawl: Crawl, say: Callable[[str], None]) -> Progress:
    """Run (or go on with) a crawl in this process, one repository after another: ``import_hf --here``."""
    if crawl.finished:
        resume(crawl.pk, send=False)
    list_step(crawl.pk, send=False)
    while True:
        claimable = Q(status=CrawlRepo.PENDING) | Q(status=CrawlRepo.RUNNING, lease_until__lt=timezone.now())
        row = CrawlRepo.objects.filter(claimable, crawl=crawl).order_by("pk").first()
        if row is None or Crawl.objects.filter(pk=crawl.pk, status=Crawl.CANCELLED).exists():
            break
        status = repo_step(row.pk)
        row.refresh_from_db()
        if status in ("wait", "retry"):  # every place for the host is held by others, or the Hub is down: stop here
            say(f"{row.repo_id}: {row.message or 'every place for the Hub host is taken'}; stopping, resume later")
            break
        say(
            f"{status:<9} {row.repo_id}"
            + (f" ({row.message})" if row.message else f" (+{row.added} added, {row.unchanged} unchanged)")
        )
    crawl.refresh_from_db()
    return progress(crawl)
