"""Runs and their figures: benchmark, prediction and soak runs, and the measured, predicted, soaked and reported
results every page and the table read through one set of field names.

Benchmark runs and their measured results live in the registry, beside reported results, so that pages and
the table read every kind of figure from one data model; the runner only executes runs and writes
them (it depends on the registry, never the other way round).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from inspector.spec_flags import Setting
from registry.models.catalog import GGUFFile, Pair
from registry.models.provenance import Provenance


class ResultFigures(models.Model):
    """The figures every result carries, measured (BenchmarkResult) or reported (ReportedResult).

    ``BenchmarkResult`` and ``ReportedResult`` subclass this with a ``pair`` foreign key, so pages,
    filters and ``refresh_best`` read both kinds through the same field names.
    """

    k = models.PositiveIntegerField(
        help_text="draft tokens per step (--spec-draft-n-max, or the n-gram method's own draft length)"
    )
    method = models.CharField(
        max_length=32,
        default="draft-simple",
        db_index=True,
        help_text="llama.cpp's --spec-type: draft-simple, ngram-mod, draft-mtp, …",
    )
    acceptance = models.FloatField(null=True, blank=True, help_text="accepted / drafted, 0–1")
    speedup = models.FloatField(null=True, blank=True, help_text="speculative ÷ plain tokens per second")
    tokens_per_second = models.FloatField(null=True, blank=True)
    baseline_tokens_per_second = models.FloatField(null=True, blank=True)
    content_type = models.CharField(max_length=32, blank=True, help_text="code, chat, prose, …")
    hardware = models.CharField(max_length=200, blank=True)
    llama_cpp_build = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


def speculation_setting(r: BenchmarkResult | PredictedResult | StabilityResult) -> Setting:
    """The setting a measured, predicted or soaked figure is of (method, K, p-min and the method's other options),
    as the runner's sweep names and deploys it."""
    return Setting(r.method, r.k, r.p_min, tuple(tuple(o) for o in r.options or ()))


class ReportedResult(ResultFigures, Provenance):
    """Figures copied from elsewhere (a paper, a blog, a client's notes), never measured here."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="reported_results")
    source_url = models.URLField(max_length=500, blank=True)
    citation = models.CharField(max_length=500, help_text="where the figures come from")
    notes = models.TextField(blank=True)
    reported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["pair", "content_type", "k"]
        constraints = [
            models.UniqueConstraint(
                fields=["origin_installation", "origin_id"],
                condition=models.Q(origin_id__isnull=False),
                name="reported_origin_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.pair} K={self.k} (reported: {self.citation})"


class BenchmarkRun(Provenance):
    """One run on a pair: queued → running → done / failed / cancelled.

    Three kinds share the table (``kind``): a benchmark (predict every setting, then measure the best), a
    prediction only, and a soak of one setting for hours (runner.runs.execute dispatches on it). A worker claims a
    run with a conditional UPDATE on ``status``, so a re-delivered task cannot run it twice; ``heartbeat_at`` lets
    the periodic sweep fail runs whose worker died.
    """

    QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED, CANCELLED)]
    FINISHED = (DONE, FAILED, CANCELLED)
    BENCHMARK, PREDICT, SOAK = "benchmark", "predict", "soak"
    KINDS = [(k, k) for k in (BENCHMARK, PREDICT, SOAK)]

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="runs")
    # The files measured (a pair is two base models; these are the repository and quant on each side).
    target_file = models.ForeignKey(GGUFFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    draft_file = models.ForeignKey(GGUFFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=16, choices=STATUSES, default=QUEUED, db_index=True)
    # A column, not only ``params["mode"]`` (kept there as submitted): pages and queries filter on it, and a JSON
    # key absent from older runs' params compares as NULL, which an SQL exclusion drops.
    kind = models.CharField(max_length=16, choices=KINDS, default=BENCHMARK, db_index=True)
    params = models.JSONField(default=dict)  # ks, content types, temperatures, repeats, n_predict, mode, …
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
        # Named explicitly: the table's name belongs to the schema (migrations, existing databases), not to the app
        # that declares the model.
        db_table = "runner_benchmarkrun"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat")]
        constraints = [
            models.UniqueConstraint(
                fields=["origin_installation", "origin_id"],
                condition=models.Q(origin_id__isnull=False),
                name="run_origin_unique",
            )
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.pair} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("run", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED

    @classmethod
    def kind_of(cls, params: dict) -> str:
        """The kind of a run submitted with ``params``: its ``mode``, a benchmark when it names none (or none known)."""
        mode = params.get("mode") if isinstance(params, dict) else None
        return mode if mode in (cls.PREDICT, cls.SOAK) else cls.BENCHMARK

    @property
    def measured_target(self) -> GGUFFile:
        """The target file measured: the run's own, else its pair's (runs queued before runs named files)."""
        return self.target_file or self.pair.target

    @property
    def measured_draft(self) -> GGUFFile:
        return self.draft_file or self.pair.draft


class BenchmarkResult(ResultFigures):
    """One measured cell: a pair at one K, temperature and content type, on one machine and build."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="results")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="measured_results")
    temperature = models.FloatField(default=0.0)
    p_min = models.FloatField(null=True, blank=True)
    options = models.JSONField(default=list, blank=True)  # the method's other options: [[flag, value], …]
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
    # How it was measured: "cli" (llama-completion against llama-speculative-simple) or "server" (two
    # llama-servers started with the deployed flags, figures from each response's timings).
    via = models.CharField(max_length=8, default="cli")
    # Under load (``--via server --clients N``): N requests at once against servers of ``parallel`` slots (-np).
    # tokens_per_second and baseline_tokens_per_second are then aggregate (all clients' tokens over the round's
    # wall time), and the speedup is against the plain server at the same concurrency.
    clients = models.PositiveSmallIntegerField(default=1)
    parallel = models.PositiveSmallIntegerField(default=1)
    latency_p50 = models.FloatField(null=True, blank=True)  # seconds per request, speculative server
    latency_p95 = models.FloatField(null=True, blank=True)
    baseline_latency_p95 = models.FloatField(null=True, blank=True)  # the plain server's
    ttft_p50 = models.FloatField(null=True, blank=True)  # seconds to the first streamed token, speculative server
    # Several clients: the share of outputs that differ from the single-client plain output (batch make-up changes
    # numerics at temperature 0): information, not a fault; where they part is in ``divergences``.
    differing_share = models.FloatField(null=True, blank=True)
    # A prompt was sent twice to one speculative server (more clients than distinct prompts): n-gram methods
    # then find their own earlier answer, so the figure is labelled "measured with repeats".
    prompt_repeats = models.BooleanField(default=False)
    # The speedup of every interleaved pair (a speculative run over the plain run beside it): a gain counts as
    # measured only when it lies beyond this range, i.e. speedup_min > 1 (runner.sweep.sweep.measurable_gain).
    # None on results measured before it was kept.
    speedup_min = models.FloatField(null=True, blank=True)
    speedup_max = models.FloatField(null=True, blank=True)
    pairs = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        db_table = "runner_benchmarkresult"
        ordering = ["content_type", "temperature", "k"]
        indexes = [models.Index(fields=["pair", "content_type"], name="result_pair_type")]

    def __str__(self) -> str:
        return f"{self.pair} K={self.k} {self.content_type} (measured)"

    @property
    def setting_label(self) -> str:
        """The setting as the sweep names it: method, K, p-min and the method's other options."""
        return speculation_setting(self).label


class PredictedResult(ResultFigures):
    """One predicted setting (runner.predict): acceptance replayed exactly from the target's transcript through
    llama.cpp's own speculative loop, speed from a cost model of the machine it was predicted on. Temperature
    0 only. Written by a prediction run (a ``BenchmarkRun`` of ``kind`` "predict") or by the
    first step of a benchmark, which then measures only the best predicted settings."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="predictions")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="predicted_results")
    temperature = models.FloatField(default=0.0)
    p_min = models.FloatField(null=True, blank=True)
    options = models.JSONField(default=list, blank=True)  # the method's other options: [[flag, value], …]
    n_predict = models.PositiveIntegerField()
    n_prompts = models.PositiveIntegerField()
    task_set = models.CharField(max_length=100, blank=True)  # the task set's name
    hardware_class = models.CharField(max_length=64, blank=True)  # the cost model's machine, e.g. cpu-2c/avx2
    drafted = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    # Transcript tokens whose margin over the runner-up is small: a real run's text may part there.
    near_ties = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["content_type", "method", "k"]
        indexes = [models.Index(fields=["pair", "content_type"], name="predicted_pair_type")]

    def __str__(self) -> str:
        return f"{self.pair} K={self.k} {self.content_type} (predicted)"

    @property
    def setting_label(self) -> str:
        """The setting as the sweep names it: method, K, p-min and the method's other options."""
        return speculation_setting(self).label


class StabilityResult(ResultFigures):
    """A soak (``manage.py soak``): the recommended llama-server setting under a loop of task-set requests for hours,
    recorded every interval. A measured figure of its own kind (stability), never mixed into speed figures.

    ``tokens_per_second`` is the soak's mean aggregate throughput, ``baseline_tokens_per_second`` the plain server's
    at the same concurrency just before, ``acceptance`` over the whole soak."""

    RUNNING, STABLE, FAILED, TIMEOUT, UNSTABLE, CANCELLED, INTERRUPTED = (
        "running",
        "stable",
        "failed",
        "timeout",
        "unstable",
        "cancelled",
        "interrupted",
    )
    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="soaks")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="stability_results")
    # The team deployment soaked, when one was named (an id, not a key: registry.team sits above this module).
    deployment_ref = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    p_min = models.FloatField(null=True, blank=True)
    options = models.JSONField(default=list, blank=True)
    clients = models.PositiveSmallIntegerField(default=1)
    parallel = models.PositiveSmallIntegerField(default=1)
    planned_s = models.PositiveIntegerField()
    elapsed_s = models.FloatField(default=0.0)
    interval_s = models.PositiveIntegerField(default=60)
    status = models.CharField(max_length=16, default=RUNNING, db_index=True)
    verdict = models.CharField(max_length=500, blank=True)  # one line: "stable for 8 h at 2 clients: …"
    command = models.TextField(blank=True)  # the llama-server command soaked
    # One entry per interval: t (s from start), requests, tokens, tokens_per_second, drafted, accepted,
    # acceptance, rss_mb, errors, timeouts, compared, differing (one client: outputs against the plain ones).
    intervals = models.JSONField(default=list)
    requests = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    timeouts = models.PositiveIntegerField(default=0)
    rss_start_mb = models.FloatField(null=True, blank=True)
    rss_end_mb = models.FloatField(null=True, blank=True)
    acceptance_min = models.FloatField(null=True, blank=True)
    acceptance_max = models.FloatField(null=True, blank=True)
    compared = models.PositiveIntegerField(default=0)  # outputs compared with the plain output (one client)
    differing = models.PositiveIntegerField(default=0)
    prompt_repeats = models.BooleanField(default=False)  # prompts came round again within the server's life
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.pair} soak ({self.status})"

    @property
    def setting_label(self) -> str:
        """The setting as the sweep names it: method, K, p-min and the method's other options."""
        return speculation_setting(self).label

    @property
    def memory_growth(self) -> float | None:
        if not self.rss_start_mb or self.rss_end_mb is None:
            return None
        return self.rss_end_mb / self.rss_start_mb - 1
