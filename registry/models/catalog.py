"""The catalog's data: token tables, tokenizer classes, families, base models, models, GGUF files and the pairs
checked between them, with what changed about their verdicts."""

from __future__ import annotations

import re

from django.db import models
from django.urls import reverse

from registry.hooks import named
from registry.sort_keys import sort_key_indexes

SHA256 = re.compile(r"[0-9a-f]{64}")  # a lowercase hex sha256, as the Hub's LFS metadata gives it


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

    @property
    def result(self) -> dict:
        """The checker's full answer (PairCheck.to_dict()): stored (older pairs, ``recheck_pairs``), else computed
        from the two stored inspections, in milliseconds, and kept on this instance."""
        try:
            return self.check_result.result
        except PairCheckResult.DoesNotExist:
            pass
        if "_full_check" not in self.__dict__:
            # llama.cpp's full check of the two files (registration decides verdicts per pair of tokenizer classes and
            # stores none): the catalog's, above the models, named by SPECREG_PAIR_FULL_CHECK (registry.hooks).
            check = named("SPECREG_PAIR_FULL_CHECK")
            self.__dict__["_full_check"] = check(self) if check is not None else {}
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
