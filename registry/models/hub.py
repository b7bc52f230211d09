"""Work done with the Hugging Face Hub: jobs a person asked for, crawls and their repositories, the places for
reading one host at once, and the files jobs brought into the model folder."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from registry.models.catalog import GGUFFile


class HubJob(models.Model):
    """Long Hub work a person asked for on the site (import a repository, the curated list, a draft search,
    an anonymous visitor's check of files read from the Hub).

    It runs in a Celery worker, not in the web request; its page follows ``status`` and shows
    ``messages`` (what happened, one line each) and the ``result``: an import's per-file outcomes, a
    check's ``PairCheck.to_dict()``.
    """

    IMPORT_REPO, IMPORT_CURATED, FIND_DRAFTS = "import_repo", "import_curated", "find_drafts"
    CHECK_PAIR, ADAPT_DRAFT = "check_pair", "adapt_draft"
    KINDS = [(k, k) for k in (IMPORT_REPO, IMPORT_CURATED, FIND_DRAFTS, CHECK_PAIR, ADAPT_DRAFT)]
    # Run by the runner's task (it downloads the draft: registry.hub.adapting); the others by registry.hub.tasks.
    RUNNER_KINDS = (ADAPT_DRAFT,)
    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED)]
    FINISHED = (DONE, FAILED)

    kind = models.CharField(max_length=32, choices=KINDS)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=STATUSES, default=QUEUED, db_index=True)
    queue = models.CharField(max_length=120)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    progress_message = models.CharField(max_length=300, blank=True)
    messages = models.JSONField(default=list)  # [{"level": "success|info|warning|error", "text": "..."}]
    result = models.JSONField(default=dict)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("hub_job", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED


class StoredFile(models.Model):
    """A file a user's job brought into the model folder (SPECREG_MODEL_DIR): an adapt job's adapted draft, or a
    download of a benchmark run or an adapt job. Its bytes count against its owner's SPECREG_USER_QUOTA_BYTES; the
    owner and staff may remove it, and ``expire_model_files`` removes it once nothing refers to it and it went
    unused for long (registry.catalog.stored_files).

    ``path`` is relative to the model folder (never a path the web names); a download is the Hub cache's entry for one
    shard (a link to its blob). ``owner`` None: nobody's (a run from the command line, or a file already in the
    folder before files were recorded), counted against no one."""

    ADAPTED, DOWNLOAD = "adapted", "download"
    KINDS = [(k, k) for k in (ADAPTED, DOWNLOAD)]

    path = models.CharField(max_length=1024, unique=True)
    kind = models.CharField(max_length=16, choices=KINDS)
    size = models.BigIntegerField(default=0)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The registered file it is (an adapted draft) or holds the bytes of (a download); None once unregistered.
    file = models.ForeignKey(GGUFFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="stored_files")
    created_at = models.DateTimeField(default=timezone.now)
    last_used = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-last_used", "pk"]

    def __str__(self) -> str:
        return f"{self.kind} {self.path} ({self.size:,} bytes)"


class Crawl(models.Model):
    """A crawl of the Hub: the GGUF repositories of an author or a search, listed page by page (the Hub's cursor
    kept in ``next_url``, so a restart goes on from it), then imported one repository per task (CrawlRepo)."""

    AUTHOR, SEARCH = "author", "search"
    BY = [(k, k) for k in (AUTHOR, SEARCH)]
    QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED, CANCELLED)]
    FINISHED = (DONE, FAILED, CANCELLED)

    by = models.CharField(max_length=16, choices=BY)
    query = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=STATUSES, default=QUEUED, db_index=True)
    max_repos = models.IntegerField()
    next_url = models.TextField(blank=True)  # the listing's next page; empty before the first and after the last
    listed = models.BooleanField(default=False)  # the listing reached its end (or max_repos)
    list_lease_until = models.DateTimeField(null=True, blank=True)  # a worker is paging the listing until then
    server_token = models.BooleanField(default=False)  # may read with the server's HF_TOKEN (decided when asked)
    queue = models.CharField(max_length=120)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"crawl {self.pk} ({self.by} {self.query!r}, {self.status})"

    def get_absolute_url(self) -> str:
        return reverse("crawl", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED


class CrawlRepo(models.Model):
    """One repository of a crawl: imported by one task, claimed for ``lease_until`` (renewed after every file),
    so that a repository whose worker was killed is taken up again once its lease runs out."""

    PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
    STATUSES = [(s, s) for s in (PENDING, RUNNING, DONE, FAILED)]

    crawl = models.ForeignKey(Crawl, on_delete=models.CASCADE, related_name="repos")
    repo_id = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=STATUSES, default=PENDING)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.SmallIntegerField(default=0)
    added = models.IntegerField(default=0)
    updated = models.IntegerField(default=0)
    unchanged = models.IntegerField(default=0)
    failed_files = models.IntegerField(default=0)
    pairs_added = models.IntegerField(default=0)
    message = models.CharField(max_length=300, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["crawl", "repo_id"], name="crawlrepo_unique")]
        indexes = [models.Index(fields=["crawl", "status"], name="crawlrepo_status")]

    def __str__(self) -> str:
        return f"{self.repo_id} in crawl {self.crawl_id} ({self.status})"


class HostSlot(models.Model):
    """One of SPECREG_CRAWL_PER_HOST places for reading a Hub host at once, shared by every crawl worker: held by a
    conditional UPDATE until ``until`` (renewed while in use), so a killed holder frees it when its time runs out."""

    host = models.CharField(max_length=200)
    slot = models.SmallIntegerField()
    holder = models.CharField(max_length=100, blank=True)
    until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["host", "slot"], name="hostslot_unique")]

    def __str__(self) -> str:
        return f"{self.host} #{self.slot}: {self.holder or 'free'}"
