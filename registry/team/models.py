"""The team's own records: notes (with every earlier version), deployments and their telemetry samples.

Three kinds of figures stay apart in specreg: *measured* by the runner (registry.BenchmarkResult),
*reported* from elsewhere (registry.ReportedResult) and *observed* on a deployment's real traffic
(``TelemetrySample`` here). Nothing here is mixed into a pair's best result.
"""

from __future__ import annotations

from typing import cast

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from registry.models import BenchmarkRun, GGUFFile, Model, Pair, Provenance

NOTE_MAX_CHARS = 20_000  # a note is prose a person types; a page of notes must stay cheap to render


class Note(Provenance):
    """A Markdown note on exactly one model, file, pair or benchmark run."""

    model = models.ForeignKey(Model, null=True, blank=True, on_delete=models.CASCADE, related_name="notes")
    file = models.ForeignKey(GGUFFile, null=True, blank=True, on_delete=models.CASCADE, related_name="notes")
    pair = models.ForeignKey(Pair, null=True, blank=True, on_delete=models.CASCADE, related_name="notes")
    run = models.ForeignKey(BenchmarkRun, null=True, blank=True, on_delete=models.CASCADE, related_name="notes")
    body = models.TextField()  # Markdown as typed; rendered (and sanitised) on the way out
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150)  # kept when the account goes (or for imported notes)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    hidden = models.BooleanField(default=False)  # by staff: kept, with its history, but not shown
    hidden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    hidden_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(model__isnull=False, file__isnull=True, pair__isnull=True, run__isnull=True)
                    | Q(model__isnull=True, file__isnull=False, pair__isnull=True, run__isnull=True)
                    | Q(model__isnull=True, file__isnull=True, pair__isnull=False, run__isnull=True)
                    | Q(model__isnull=True, file__isnull=True, pair__isnull=True, run__isnull=False)
                ),
                name="note_on_exactly_one_thing",
            ),
            models.UniqueConstraint(
                fields=["origin_installation", "origin_id"],
                condition=Q(origin_id__isnull=False),
                name="note_origin_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"note {self.pk} by {self.author_name} on {self.subject}"

    @property
    def subject(self) -> Model | GGUFFile | Pair | BenchmarkRun:
        # The note_on_exactly_one_thing constraint: a stored note is on one of the four.
        return cast("Model | GGUFFile | Pair | BenchmarkRun", self.model or self.file or self.pair or self.run)

    def get_absolute_url(self) -> str:
        return reverse("note", args=[self.pk])


class NoteVersion(models.Model):
    """A note's text as it was before an edit: edits never lose what was written."""

    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="versions")
    body = models.TextField()
    author_name = models.CharField(max_length=150)  # who wrote this version
    written_at = models.DateTimeField()  # when this version was written (the note's updated_at then)
    replaced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    replaced_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-replaced_at", "-pk"]

    def __str__(self) -> str:
        return f"note {self.note_id} as written by {self.author_name} at {self.written_at:%Y-%m-%d %H:%M}"


class Deployment(Provenance):
    """What a team runs in production: a target, a draft or a draftless method, and the exact command."""

    target = models.ForeignKey(GGUFFile, on_delete=models.PROTECT, related_name="deployments_as_target")
    draft = models.ForeignKey(
        GGUFFile, null=True, blank=True, on_delete=models.PROTECT, related_name="deployments_as_draft"
    )
    pair = models.ForeignKey(Pair, null=True, blank=True, on_delete=models.SET_NULL, related_name="deployments")
    run = models.ForeignKey(
        BenchmarkRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="deployments"
    )  # the run whose recommendation it follows
    method = models.CharField(max_length=32)  # a --spec-type name (inspector.speculative.SPEC_TYPES)
    k = models.PositiveIntegerField(null=True, blank=True)  # draft tokens per step; None: not set
    flags = models.CharField(max_length=1000, blank=True)  # other options worth noting (-ngl, -c, …)
    command = models.TextField()  # the exact llama-server command line
    host = models.CharField(max_length=255, blank=True)
    # The server's base URL (http://host:port); telemetry reads URL/metrics. Staff only: the server
    # fetches it, so it is how someone would make the server reach an internal address.
    url = models.URLField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author_name = models.CharField(max_length=150)
    deployed_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True, blank=True)  # retired deployments are kept, with this date
    created_at = models.DateTimeField(auto_now_add=True)
    # A "scrape now" queued for the telemetry worker (telemetry.queue_scrape), and when that worker took it:
    # the page shows it waiting or running; both are cleared when its sample is stored.
    scrape_queued_at = models.DateTimeField(null=True, blank=True)
    scrape_started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-deployed_at", "-pk"]
        indexes = [models.Index(fields=["retired_at", "url"], name="deployment_active_url")]
        constraints = [
            models.UniqueConstraint(
                fields=["origin_installation", "origin_id"],
                condition=Q(origin_id__isnull=False),
                name="deployment_origin_unique",
            )
        ]

    def __str__(self) -> str:
        what = f"{self.method} K={self.k}" if self.k else self.method
        return f"deployment {self.pk}: {self.target} ({what})"

    def get_absolute_url(self) -> str:
        return reverse("deployment", args=[self.pk])

    @property
    def active(self) -> bool:
        return self.retired_at is None


class TelemetrySample(models.Model):
    """One scrape of a deployment's /metrics: the counters as read, and the traffic since the last good scrape.

    A failed scrape is a sample with ``ok=False`` and its error: a gap in the series, not traffic.
    Deltas are None on the first good scrape (nothing to subtract). When a counter is lower than
    before, the server restarted: ``reset`` is set and the delta is the counter itself (the traffic
    since the restart; what came between the last scrape and the restart is lost, as in Prometheus).
    """

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="samples")
    scraped_at = models.DateTimeField()
    ok = models.BooleanField()
    error = models.CharField(max_length=500, blank=True)
    reset = models.BooleanField(default=False)
    # Counter values as read (llamacpp:<name>), None when the scrape failed or the counter was absent.
    draft_tokens_total = models.FloatField(null=True, blank=True)
    accepted_tokens_total = models.FloatField(null=True, blank=True)
    drafts_total = models.FloatField(null=True, blank=True)
    tokens_predicted_total = models.FloatField(null=True, blank=True)
    tokens_predicted_seconds_total = models.FloatField(null=True, blank=True)
    # Traffic since the previous good scrape (or since a restart).
    draft_tokens = models.FloatField(null=True, blank=True)
    accepted_tokens = models.FloatField(null=True, blank=True)
    drafts = models.FloatField(null=True, blank=True)
    tokens_predicted = models.FloatField(null=True, blank=True)
    tokens_predicted_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["scraped_at", "pk"]
        indexes = [models.Index(fields=["deployment", "scraped_at"], name="sample_deployment_time")]

    def __str__(self) -> str:
        return f"sample {self.pk} of deployment {self.deployment_id} ({'ok' if self.ok else 'gap'})"

    @property
    def acceptance(self) -> float | None:
        """Accepted ÷ drafted tokens in this interval."""
        return (
            self.accepted_tokens / self.draft_tokens if self.draft_tokens and self.accepted_tokens is not None else None
        )

    @property
    def tokens_per_second(self) -> float | None:
        """Generated tokens ÷ generation seconds in this interval (llama.cpp's own clock)."""
        return (
            self.tokens_predicted / self.tokens_predicted_seconds
            if self.tokens_predicted_seconds and self.tokens_predicted is not None
            else None
        )
