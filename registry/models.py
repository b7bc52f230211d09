"""The registry's data: GGUF files, token tables, models, families, pairs, benchmark runs and results.

Benchmark runs and their measured results live here, beside reported results, so that pages and
the table read every kind of figure from one data model; the runner only executes runs and writes
them (it depends on the registry, never the other way round).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from inspector.spec_flags import Setting
from registry.sort_keys import sort_key_indexes

SHA256 = re.compile(r"[0-9a-f]{64}")  # a lowercase hex sha256, as the Hub's LFS metadata gives it

if TYPE_CHECKING:
    from inspector.spec_flags import Setting


class TokenTable(models.Model):
    """A ``tokenizer.ggml.tokens`` array as stored (little-endian), kept once per distinct content."""

    sha256 = models.CharField(max_length=64, unique=True)
    count = models.PositiveIntegerField()
    blob = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.count:,} tokens ({self.sha256[:12]})"


class TokenTypeTable(models.Model):
    """A ``tokenizer.ggml.token_type`` array as little-endian int32s, kept once per distinct content like
    ``TokenTable``. Whether a near-miss draft can be adapted to a target reads it (only a CONTROL,
    USER_DEFINED, UNUSED or UNKNOWN token may take another text).

    Files registered before it existed have none (``GGUFFile.token_types`` null while their stored metadata
    names the key): their adaptability reads "cannot tell" (registry.catalog.adaptable). register_gguf and
    import_hf skip a file whose etag and size are unchanged, so ``manage.py reread_headers`` reads such headers
    again and stores their types (registry.catalog.reread); a knowledge base carries them (``token_types``,
    schema 1.4)."""

    sha256 = models.CharField(max_length=64, unique=True)
    count = models.PositiveIntegerField()
    blob = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.count:,} token types ({self.sha256[:12]})"


class Family(models.Model):
    """Models sharing a vocabulary (one vocabulary index key): candidates to draft for each other."""

    key = models.CharField(max_length=120, unique=True)
    vocab_type = models.CharField(max_length=32)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "families"

    def __str__(self) -> str:
        return self.name


class BaseModel(models.Model):
    """One model across repositories: every uploader's quants of Qwen2.5-Coder-0.5B-Instruct, say.

    ``key`` is the model's name, normalised, so the rules below agree on it where they can; ``rule`` says
    which one grouped it (registry.catalog.bases): the Hub's model tree (``base_model`` in the card data,
    where it names one model), else the header (``general.basename`` with ``general.size_label`` and
    ``general.finetune``), else the repository alone (or the file's name, for a local file). Before all of them,
    a draft ``adapt_draft`` wrote (``specreg.adapted.*`` keys) is a model of its own, per original draft and target:
    it keeps the draft's names and card, and joining the original would change that model's verdicts.
    """

    RULE_HUB, RULE_HEADER, RULE_REPO, RULE_ADAPTED = "hub", "header", "repo", "adapted"
    RULES = [(r, r) for r in (RULE_HUB, RULE_HEADER, RULE_REPO, RULE_ADAPTED)]

    key = models.CharField(max_length=300, unique=True)
    name = models.CharField(max_length=300)
    rule = models.CharField(max_length=8, choices=RULES)
    architecture = models.CharField(max_length=64, blank=True)
    parameter_count = models.BigIntegerField(default=0)
    # What the size rests on (registry.catalog.sizes): "tensor data", "tensor list", "size label" (a claim) or "none".
    size_evidence = models.CharField(max_length=16, blank=True, default="")
    quants = models.PositiveIntegerField(default=0)  # its registered files, kept by registration for the table
    # The owner the Hub card's base_model names ("Qwen" for Qwen/Qwen2.5-Coder-0.5B-Instruct): files uploaded by
    # that owner are the ones a pair shows first (registry.catalog.combinations), whoever else claims the model.
    publisher = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TokenizerClass(models.Model):
    """Files whose compatibility-relevant tokenizer data are identical: vocabulary type, effective BOS/EOS ids
    and whether each is added, token count and token texts (the token table). llama.cpp's rules read only
    these, so a verdict holds for every file of two classes (registry.catalog.classes)."""

    fingerprint = models.CharField(max_length=64, unique=True)
    vocab_type = models.CharField(max_length=32)
    vocab_key = models.CharField(max_length=120)
    n_tokens = models.PositiveIntegerField(default=0)
    bos_id = models.IntegerField(default=-1)
    eos_id = models.IntegerField(default=-1)
    add_bos = models.BooleanField(default=False)
    add_eos = models.BooleanField(default=False)
    token_table = models.ForeignKey("TokenTable", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "tokenizer classes"
        # Classes within the rules' tolerance are found by key and a ±128 size window, like files were.
        indexes = [models.Index(fields=["vocab_key", "n_tokens"], name="class_vocab_key_n")]

    def __str__(self) -> str:
        return f"{self.vocab_type} · {self.n_tokens:,} tokens ({self.fingerprint[:12]})"


class BaseClass(models.Model):
    """A base model has files of this tokenizer class (one row per base and class, not per file), with the first
    such file as the one its pairs are checked and benchmarked with by default. Registration finds partner base
    models through this table: its size follows base models, not files."""

    base = models.ForeignKey(BaseModel, on_delete=models.CASCADE, related_name="classes")
    tokenizer_class = models.ForeignKey(TokenizerClass, on_delete=models.CASCADE, related_name="bases")
    file = models.ForeignKey("GGUFFile", on_delete=models.CASCADE, related_name="+")
    # How many of the base model's files have this class: N of M quants is read from these counts, never stored
    # per pair (the smallest drafts are listed by thousands of targets; a new quant would rewrite every row).
    files = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tokenizer_class", "base"], name="baseclass_class_base_unique")]

    def __str__(self) -> str:
        return f"{self.base} · {self.tokenizer_class}"


class ClassCheck(models.Model):
    """llama.cpp's vocabulary rules for two tokenizer classes, decided once (``a`` <= ``b``: the rules are symmetric).

    ``failed_rule``: the first failing of vocab_type, bos, eos, vocab_size, token_text. The architecture rule
    belongs to files and is added per pair (registry.catalog.pairing)."""

    a = models.ForeignKey(TokenizerClass, on_delete=models.CASCADE, related_name="+")
    b = models.ForeignKey(TokenizerClass, on_delete=models.CASCADE, related_name="+")
    compatible = models.BooleanField()
    failed_rule = models.CharField(max_length=32, blank=True)
    rules_from = models.CharField(max_length=32)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["a", "b"], name="classcheck_a_b_unique")]

    def __str__(self) -> str:
        return f"classes {self.a_id} ~ {self.b_id}: {self.failed_rule or 'compatible'}"


class Model(models.Model):
    """The quants of one model in one repository (``repo`` is empty for local files)."""

    repo = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=300)
    family = models.ForeignKey(Family, null=True, blank=True, on_delete=models.SET_NULL, related_name="models")
    base = models.ForeignKey(BaseModel, null=True, blank=True, on_delete=models.SET_NULL, related_name="models")
    architecture = models.CharField(max_length=64, blank=True)
    parameter_count = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo", "name"], name="model_repo_name_unique")]
        ordering = ["repo", "name"]

    def __str__(self) -> str:
        return f"{self.repo}: {self.name}" if self.repo else self.name

    def get_absolute_url(self) -> str:
        return reverse("model", args=[self.pk])


class Provenance(models.Model):
    """Where a record was made, for records that came from another installation (``import_kb``).

    Empty ``origin_installation``: made here. Otherwise the other installation's id (its data
    folder's ``installation_id``) and the record's id there, so importing the same export twice
    finds what it already imported, and two installations' figures for the same cell stay apart.
    """

    origin_installation = models.CharField(max_length=64, blank=True, default="")
    origin_id = models.BigIntegerField(null=True, blank=True)
    origin_author = models.CharField(max_length=150, blank=True, default="")  # a user name there, not a user here
    imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class GGUFFile(models.Model):
    """One registered GGUF file (the first shard of a split one), named by its ``source``."""

    source = models.CharField(max_length=1024, unique=True)  # hf://OWNER/REPO[@REV]/PATH or a local path
    repo = models.CharField(max_length=200, blank=True)
    revision = models.CharField(max_length=255, blank=True)  # as asked for; empty: the default branch
    path = models.CharField(max_length=1000)
    commit = models.CharField(max_length=64, blank=True)  # what the revision resolved to when inspected
    size = models.BigIntegerField(null=True, blank=True)  # all shards together
    etag = models.CharField(max_length=200, blank=True)  # LFS sha256 (joined for shards) or local size+mtime
    model = models.ForeignKey(Model, on_delete=models.PROTECT, related_name="files")
    token_table = models.ForeignKey(TokenTable, null=True, blank=True, on_delete=models.PROTECT, related_name="files")
    token_types = models.ForeignKey(
        TokenTypeTable, null=True, blank=True, on_delete=models.PROTECT, related_name="files"
    )
    tokenizer_class = models.ForeignKey(
        TokenizerClass, null=True, blank=True, on_delete=models.PROTECT, related_name="files"
    )
    info = models.JSONField()  # ModelInfo.to_dict(): pages read this, never the file again
    vocab_key = models.CharField(max_length=120)
    vocab_type = models.CharField(max_length=32)
    n_vocab = models.PositiveIntegerField(default=0)
    architecture = models.CharField(max_length=64)
    arch_kind = models.CharField(max_length=16)
    # info["speculative_type"] as a column: pairing reads it for every partner class, and extracting it from the JSON
    # detoasts each file's whole inspection on every such read.
    speculative_type = models.CharField(max_length=32, blank=True, default="")
    parameter_count = models.BigIntegerField(default=0)
    file_type = models.CharField(max_length=32, blank=True)
    header_size = models.BigIntegerField(default=0)
    split_count = models.PositiveIntegerField(default=1)
    inspected_at = models.DateTimeField()
    # Which installation inspected it, when the inspection came from another one (import_kb).
    origin_installation = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        indexes = [
            # Registration finds candidates by key and a ±128 vocabulary size window.
            models.Index(fields=["vocab_key", "n_vocab"], name="file_vocab_key_n"),
            models.Index(fields=["vocab_type", "n_vocab"], name="file_vocab_type_n"),
        ]
        ordering = ["source"]
        # Staff have it implicitly. Without it a signed-in user's Hub reads go without the server's token.
        permissions = [("use_server_token", "May have the server's Hugging Face token read private or gated files")]

    def __str__(self) -> str:
        return self.source

    def get_absolute_url(self) -> str:
        return reverse("model", args=[self.model_id]) + f"?file={self.pk}"

    @property
    def content_sha256(self) -> str:
        """The file's sha256 where the etag is one (a single Hub file's LFS hash), else "" (a local file's etag
        is its size and mtime, a split file's its shards' hashes joined)."""
        return self.etag if SHA256.fullmatch(self.etag) else ""

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class Pair(models.Model):
    """A target and a draft base model whose vocabularies could match, with the checker's full verdict.

    Pairs are computed at registration, one per two base models (registry.catalog.pairing), the bigger as
    target. ``target`` and ``draft`` are the two files its verdict was checked on and a benchmark uses unless
    told otherwise; each run records the files it measured (``BenchmarkRun.target_file``/``draft_file``). The
    best result (measured first, reported otherwise) is copied here so the table sorts without joins;
    ``registry.results.figures.refresh_best`` keeps it current.
    """

    KIND_MEASURED = "measured"
    KIND_REPORTED = "reported"

    # No index of their own for draft, target_base and draft_base: each leads a composite one below (or the unique
    # constraint), and a pair is written into every index of this table (about 40, most for the table's orders).
    target = models.ForeignKey(GGUFFile, on_delete=models.CASCADE, related_name="pairs_as_target")
    draft = models.ForeignKey(GGUFFile, on_delete=models.CASCADE, related_name="pairs_as_draft", db_index=False)
    target_base = models.ForeignKey(
        BaseModel, null=True, blank=True, on_delete=models.CASCADE, related_name="pairs_as_target", db_index=False
    )
    draft_base = models.ForeignKey(
        BaseModel, null=True, blank=True, on_delete=models.CASCADE, related_name="pairs_as_draft", db_index=False
    )
    compatible = models.BooleanField()  # at least one (target class, draft class) combination works
    llama_cpp_compatible = models.BooleanField()  # llama.cpp's own rules only (ignores architecture)
    failed_rule = models.CharField(max_length=32, blank=True)
    rules_from = models.CharField(max_length=32)  # llama.cpp build the rules follow
    checked_at = models.DateTimeField()
    # Over every combination of the two base models' tokenizer classes: all compatible ("compatible"), some
    # ("partial"), or none ("incompatible") (registry.catalog.combinations): the one vocabulary of the table's filter,
    # the API, the CSV, the knowledge base and the pages. It changes only when a side gains a class, never with a
    # new quant. (Before migration 0028 these were "all", "partial" and "none".)
    VERDICT_ALL, VERDICT_PARTIAL, VERDICT_NONE = "compatible", "partial", "incompatible"
    VERDICTS = (VERDICT_ALL, VERDICT_PARTIAL, VERDICT_NONE)
    verdict = models.CharField(max_length=12, default=VERDICT_ALL)  # indexed below (equality only: no pattern index)
    # Staff chose the two files in the admin: registration keeps them (the verdict still follows every class).
    files_pinned = models.BooleanField(default=False)
    size_ratio = models.FloatField(null=True, blank=True)  # target parameters / draft parameters
    # The model names, copied so the table sorts by them without joining 100,000 rows first.
    target_name = models.CharField(max_length=300, blank=True)
    draft_name = models.CharField(max_length=300, blank=True)
    best_kind = models.CharField(max_length=16, blank=True)
    best_speedup = models.FloatField(null=True, blank=True)  # only a figure that may be headlined (best_note empty)
    # Why the best measured figure is not headlined, in words ("no measurable gain: 2.13× in 1 repeat"), else "".
    best_note = models.CharField(max_length=80, blank=True, default="")
    best_k = models.PositiveIntegerField(null=True, blank=True)
    best_acceptance = models.FloatField(null=True, blank=True)
    best_content_type = models.CharField(max_length=32, blank=True)
    # llama.cpp's --spec-type of the best result: a draftless method (n-gram, own MTP heads) measured on
    # the target's own pair (target = draft) shows as the draft column's "none (n-gram)"/"own MTP heads".
    best_method = models.CharField(max_length=32, blank=True, default="")
    # The best *predicted* setting (registry.results.figures.refresh_predicted), kept apart from the best
    # measured/reported one above: a prediction is never shown or sorted as if it had been measured.
    predicted_speedup = models.FloatField(null=True, blank=True)
    predicted_k = models.PositiveIntegerField(null=True, blank=True)
    predicted_method = models.CharField(max_length=32, blank=True, default="")
    predicted_content_type = models.CharField(max_length=32, blank=True, default="")
    # What the search box matches (both files' source, model, architecture and family, lower-case),
    # set by registry.catalog.columns.table_columns; PostgreSQL indexes it with trigrams (migration 0005).
    search_text = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["target_base", "draft_base"], name="pair_bases_unique"),
        ]
        # One index per order the table offers (registry.table.keyset), so any page, deep or not, is an
        # index range read from a cursor rather than a sort or an OFFSET.
        indexes = [
            models.Index(fields=["draft", "target"], name="pair_draft_target"),
            models.Index(fields=["draft_base", "target_base"], name="pair_draft_target_base"),
            models.Index(fields=["verdict"], name="pair_verdict"),
            # The few pairs with a measured, reported or predicted figure (registry.catalog.listing.with_evidence reads
            # them whenever a small draft joins a big family): an index of those alone, not a scan of every pair.
            models.Index(fields=["id"], name="pair_with_figures", condition=~models.Q(best_kind="")),
            *sort_key_indexes(),
        ]

    def __str__(self) -> str:
        return f"{self.draft} → {self.target}"

    def get_absolute_url(self) -> str:
        return reverse("pair", args=[self.pk])

    # Set by registry.catalog (RegistryConfig.ready): llama.cpp's full check of the pair's two files, for pairs
    # whose answer is not stored (registration decides verdicts per pair of tokenizer classes and stores none).
    full_check: ClassVar[Callable[[Pair], dict] | None] = None

    @property
    def result(self) -> dict:
        """The checker's full answer (PairCheck.to_dict()): stored (older pairs, ``recheck_pairs``), else computed
        from the two stored inspections, in milliseconds, and kept on this instance."""
        try:
            return self.check_result.result
        except PairCheckResult.DoesNotExist:
            pass
        if "_full_check" not in self.__dict__:
            self.__dict__["_full_check"] = Pair.full_check(self) if Pair.full_check is not None else {}
        return self.__dict__["_full_check"]


class AdaptCheck(models.Model):
    """Whether ``draft`` can be adapted to ``target`` (inspector.adapt.plan on their stored inspections), decided
    once for the two files a pair shows (registry.catalog.adaptable) and read by the table, the pair page, the
    API and find_drafts.

    Per file pair, not per ``ClassCheck``: the class rows are symmetric and stored only where the token texts had
    to be compared (a BOS mismatch, R1-Distill's case, is decided from the class columns and stores none), and
    the plan reads what a class does not hold (token types, padding and other special ids, suppressed tokens,
    architecture, method). Only incompatible pairs failing on bos, eos or token_text get a row: a few per target
    base model (catalog.listing), so the table grows with base models. A row older than either file's
    inspection, or decided under other rules (``version``), is decided again."""

    ADAPTABLE, REFUSED, UNKNOWN = "adaptable", "refused", "unknown"
    STATES = [(s, s) for s in (ADAPTABLE, REFUSED, UNKNOWN)]

    target = models.ForeignKey("GGUFFile", on_delete=models.CASCADE, related_name="+")
    draft = models.ForeignKey("GGUFFile", on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=STATES)
    rule = models.CharField(max_length=32, blank=True)  # the rule that refuses it, or why it cannot tell
    detail = models.TextField(blank=True)
    plan = models.JSONField(null=True, blank=True)  # inspector.adapt.Plan.to_dict() when adaptable
    version = models.CharField(max_length=64)  # the rules it was decided under
    decided_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["target", "draft"], name="adaptcheck_target_draft_unique")]

    def __str__(self) -> str:
        return f"{self.draft_id} → {self.target_id}: {self.state}"


class PairRedirect(models.Model):
    """A pair id that no longer exists (pairs of files merged into pairs of base models): where it went."""

    old_id = models.BigIntegerField(unique=True)
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="+")

    def __str__(self) -> str:
        return f"pair {self.old_id} → {self.pair_id}"


class PairCheckResult(models.Model):
    """A pair's full check result: kilobytes per pair, so not in the row the table scans and sorts."""

    pair = models.OneToOneField(Pair, on_delete=models.CASCADE, primary_key=True, related_name="check_result")
    result = models.JSONField()

    def __str__(self) -> str:
        return f"check of pair {self.pair_id}"


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


class VerdictChange(models.Model):
    """A pair's verdict that changed when it was checked again under other rules (``recheck_pairs``)."""

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="verdict_changes")
    old_compatible = models.BooleanField()
    new_compatible = models.BooleanField()
    old_failed_rule = models.CharField(max_length=32, blank=True)
    new_failed_rule = models.CharField(max_length=32, blank=True)
    old_rules_from = models.CharField(max_length=32, blank=True)
    new_rules_from = models.CharField(max_length=32)
    # The pair's state kind under the new rules (inspector.state: kv, checkpoints, rollback, none) and the rule's
    # words for the change, so a page says why a hybrid pair became compatible.
    new_state = models.CharField(max_length=16, blank=True, default="")
    reason = models.CharField(max_length=300, blank=True, default="")
    changed_at = models.DateTimeField()

    class Meta:
        ordering = ["-changed_at", "pk"]

    def __str__(self) -> str:
        return f"{self.pair}: {self.old_failed_rule or 'compatible'} → {self.new_failed_rule or 'compatible'}"


class BenchmarkRun(Provenance):
    """One benchmark of a pair: queued → running → done / failed / cancelled.

    A worker claims a run with a conditional UPDATE on ``status``, so a re-delivered task cannot
    run it twice; ``heartbeat_at`` lets the periodic sweep fail runs whose worker died.
    """

    QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, DONE, FAILED, CANCELLED)]
    FINISHED = (DONE, FAILED, CANCELLED)

    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="runs")
    # The files measured (a pair is two base models; these are the repository and quant on each side).
    target_file = models.ForeignKey(GGUFFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    draft_file = models.ForeignKey(GGUFFile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
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
    0 only. Written by a prediction run (a ``BenchmarkRun`` with ``params["mode"] == "predict"``) or by the
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


class RateCount(models.Model):
    """Requests counted per client or user in one fixed window, shared by every web process.

    Hand-written because django-ratelimit needs memcached or Redis (it refuses the database cache,
    whose increments are not atomic), and the embedded default runs with neither: an UPDATE of
    ``count = count + 1`` is atomic on SQLite and PostgreSQL alike.
    """

    key = models.CharField(max_length=200)  # "<scope>:ip:<address>" or "<scope>:user:<id>"
    window = models.BigIntegerField()  # start of the window, in seconds since the epoch
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "window"], name="ratecount_key_window_unique")]

    def __str__(self) -> str:
        return f"{self.key} @ {self.window}: {self.count}"


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
