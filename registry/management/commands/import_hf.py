"""import_hf OWNER/REPO: register a Hub repository's GGUF files, reading only their headers.

import_hf --author NAME / --search TEXT: crawl every GGUF repository of an author or a search, one Celery task per
repository on the crawl queue (or ``--here``, in this process); --resume / --cancel / --status ID act on a crawl.
"""

from __future__ import annotations

import time

from inspector.management.base import SpecregCommand, UserError
from registry.hub import crawl as crawls
from registry.hub.importing import HubImportError, hub_job_deadline, import_hf
from registry.models import Crawl


class Command(SpecregCommand):
    help = (
        "Register the .gguf files of a Hugging Face model repository: headers are read by Range "
        "requests, nothing is downloaded. Gated or private repos need HF_TOKEN. Unchanged files "
        "are skipped. With --author or --search, crawl every GGUF repository they list. "
        "Exit status: 0 all imported, 1 some files or repositories failed, 2 error."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("repo", nargs="?", help="OWNER/REPO (or hf://OWNER/REPO)")
        parser.add_argument(
            "--include", metavar="GLOB", help="only files matching GLOB (case-insensitive), e.g. '*Q4_K_M*'"
        )
        parser.add_argument("--revision", metavar="REV", help="branch, tag or commit (default: the main branch)")
        crawl = parser.add_argument_group("crawls")
        crawl.add_argument("--author", metavar="NAME", help="crawl every GGUF repository of this user or organisation")
        crawl.add_argument("--search", metavar="TEXT", help="crawl every GGUF repository whose name contains TEXT")
        crawl.add_argument("--max-repos", type=int, metavar="N", help="stop listing after N repositories")
        crawl.add_argument("--here", action="store_true", help="crawl in this process (no worker needed)")
        crawl.add_argument("--wait", action="store_true", help="follow a queued crawl until it finishes")
        crawl.add_argument("--resume", type=int, metavar="ID", help="go on with a crawl that stopped")
        crawl.add_argument("--cancel", type=int, metavar="ID", help="cancel a crawl")
        crawl.add_argument("--status", type=int, metavar="ID", help="print a crawl's progress")

    def handle(self, *args, repo: str | None, include: str | None, revision: str | None, **o) -> None:
        crawl_args = [o["author"], o["search"], o["resume"], o["cancel"], o["status"]]
        given = sum(x is not None for x in crawl_args) + (repo is not None)
        if given != 1:
            raise UserError("give one of OWNER/REPO, --author, --search, --resume, --cancel or --status")
        if repo is not None:
            return self._one_repo(repo, include, revision)
        if include or revision:
            raise UserError("--include and --revision apply to one repository, not to a crawl")
        try:
            self._crawl(o)
        except crawls.CrawlError as exc:
            raise UserError(str(exc)) from None

    def _one_repo(self, repo: str, include: str | None, revision: str | None) -> None:
        def progress(o) -> None:
            extra = f" ({o.message})" if o.message else (f" (+{o.pairs_added} pairs)" if o.pairs_added else "")
            self.stdout.write(f"{o.status:<9} {o.source}{extra}")

        try:
            with hub_job_deadline():  # as for the web's import jobs: one end for all its reads
                report = import_hf(repo, revision=revision, include=include, progress=progress, step=self.stdout.write)
        except HubImportError as exc:
            raise UserError(str(exc)) from None
        self.stdout.write(report.summary())
        if report.failed:
            self.stdout.flush()
            raise SystemExit(1)

    def _crawl(self, o: dict) -> None:
        if o["cancel"] is not None:
            self.stdout.write(f"crawl {o['cancel']}: {crawls.cancel(o['cancel'])}")
            return
        if o["status"] is not None:
            c = crawls.get(o["status"])
            self.stdout.write(f"crawl {c.pk} ({c.by} {c.query!r}): {crawls.progress(c).line()}")
            return
        if o["resume"] is not None:
            c = crawls.get(o["resume"])
            if not o["here"]:
                n = crawls.resume(c.pk)
                self.stdout.write(f"crawl {c.pk}: {n} repositories handed to the crawl workers again")
        else:
            by, query = (Crawl.AUTHOR, o["author"]) if o["author"] is not None else (Crawl.SEARCH, o["search"])
            c = crawls.start(by, query, max_repos=o["max_repos"], send=not o["here"])
            where = "in this process" if o["here"] else f"on queue {c.queue}"
            self.stdout.write(f"crawl {c.pk}: {by} {c.query!r}, up to {c.max_repos} repositories, {where}")
        if o["here"]:
            final = crawls.run_here(c, self.stdout.write)
        elif o["wait"]:
            final = self._follow(c)
        else:
            self.stdout.write(
                f"follow it with: python manage.py import_hf --status {c.pk}  (page: {c.get_absolute_url()})"
            )
            return
        self.stdout.write(f"crawl {c.pk}: {final.line()}")
        if final.failed or final.failed_files or final.status != Crawl.DONE:
            self.stdout.flush()
            raise SystemExit(1)

    def _follow(self, c: Crawl) -> crawls.Progress:
        last = ""
        while True:
            c.refresh_from_db()
            p = crawls.progress(c)
            if p.line() != last:
                self.stdout.write(p.line())
                last = p.line()
            if c.finished:
                return p
            time.sleep(2)
