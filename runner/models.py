"""Benchmark runs (a queued job with its progress and logs) and their measured results."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from registry.models import Pair, ResultFigures


class BenchmarkRun(models.Model):
    """One benchmark of a pair: queued → running → done / failed / cancelled.

    A worker claims a run with a conditional UPDATE on ``status``, so a re-delivered task cannot
    run it twice; ``heartbeat_at`` lets the periodic sweep fail runs whose worker died.
    """

    QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED, CANCELLED)]
    FINISHED = (DONE, FAILED, CANCELLED)

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=16, choices=STATUSES, default=QUEUED, db_index=True)
    params = models.JSONField(default=dict)  # ks, content types, temperatures, repeats, n_predict, …
    queue = models.CharField(max_length=120)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)  # host:pid that claimed it
    progress = models.FloatField(default=0.0)  # 0–1
    progress_message = models.CharField(max_length=300, blank=True)
    cancel_requested = models.BooleanField(default=False)
    log = models.TextField(blank=True)  # what happened, with llama.cpp's stderr of failed runs
    error = models.TextField(blank=True)  # one line when failed
    hardware = models.JSONField(default=dict)
    hardware_class = models.CharField(max_length=64, blank=True)
    build = models.JSONField(default=dict)  # llama.cpp version, commit, binaries used
    summary = models.JSONField(default=dict)  # recommendations, notes, overhead
    report_md = models.TextField(blank=True)
    server_command = models.TextField(blank=True)
    systemd_unit = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.pair} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("run", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED


class BenchmarkResult(ResultFigures):
    """One measured cell: a pair at one K, temperature and content type, on one machine and build."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="results")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="measured_results")
    temperature = models.FloatField(default=0.0)
    p_min = models.FloatField(null=True, blank=True)
    n_predict = models.PositiveIntegerField()
    repeats = models.PositiveIntegerField()
    n_prompts = models.PositiveIntegerField()
    status = models.CharField(max_length=16)  # ok, failed, timeout, cancelled
    error = models.TextField(blank=True)
    speculation_ran = models.BooleanField(default=True)
    baseline_min = models.FloatField(null=True, blank=True)
    baseline_max = models.FloatField(null=True, blank=True)
    tps_min = models.FloatField(null=True, blank=True)
    tps_max = models.FloatField(null=True, blank=True)
    drafted = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    mean_accepted = models.FloatField(null=True, blank=True)  # accepted tokens per verification
    identical = models.BooleanField(null=True, blank=True)  # at temperature 0 only
    divergences = models.JSONField(default=list)  # first differing positions, per prompt/repeat
    # Share of the CPU other processes took while the cell ran: speculation suffers most from
    # contention, so figures measured on a busy machine are flagged rather than trusted.
    other_cpu_share = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["content_type", "temperature", "k"]
        indexes = [models.Index(fields=["pair", "content_type"], name="result_pair_type")]

    def __str__(self) -> str:
        return f"{self.pair} K={self.k} {self.content_type} (measured)"
