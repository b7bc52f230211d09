"""The pairs table's rows as plain records from one narrow query (no model instances, no JSON, no token tables).

``TablePair`` and ``TableFile`` carry the attribute names of ``Pair`` and ``GGUFFile`` that rows,
``serializers.pair_row`` and the CSV read, so the same code formats both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from registry.bulk_sql import id_in
from registry.catalog.adaptable import api_value, for_pairs
from registry.catalog.combinations import compatible_quants
from registry.models import Pair


def pairs_by_id(ids: list[int]) -> QuerySet[Pair]:
    """``Pair.objects.filter(pk__in=ids)``, sent to PostgreSQL as one array parameter (registry.bulk_sql)."""
    return Pair.objects.filter(id_in(Pair, "id", ids))


FILE_FIELDS = (
    "pk",
    "source",
    "repo",
    "architecture",
    "parameter_count",
    "file_type",
    "n_vocab",
    "vocab_type",
    "arch_kind",
    "speculative_type",
    "model_id",
    "model__name",
    "model__base__quants",
    "model__base__parameter_count",
    "model__base__name",
)
# A short list of ids PostgreSQL joins to the files by primary key; a long one makes it hash the whole file
# table, whose cost grows with the registry, so longer lists go in batches of this many.
# (figures: docs/benchmarks.md, "Figures behind design choices")
BATCH = 100
PAIR_FIELDS = (
    "pk",
    "compatible",
    "llama_cpp_compatible",
    "failed_rule",
    "rules_from",
    "checked_at",
    "size_ratio",
    "best_kind",
    "best_speedup",
    "best_note",
    "best_k",
    "best_acceptance",
    "best_content_type",
    "best_method",
    "predicted_speedup",
    "predicted_k",
    "predicted_method",
    "predicted_content_type",
    "verdict",
    "target_base_id",
    "draft_base_id",
    "target__tokenizer_class_id",
)


@dataclass(slots=True)
class TableModel:
    name: str
    quants: int | None  # files of its base model (None: a model without one)
    # its base model's size by the best evidence of its files (registry.catalog.sizes): a header-only file has none
    base_parameters: int | None = None
    base_name: str | None = None  # rows name the model by its base model (registry.catalog.columns.display_name)

    @property
    def shown(self) -> str:
        return self.base_name or self.name


@dataclass(slots=True)
class TableFile:
    pk: int
    source: str
    repo: str
    architecture: str
    parameter_count: int
    file_type: str
    n_vocab: int
    vocab_type: str
    arch_kind: str
    speculative_type: str
    model_id: int
    model: TableModel


@dataclass(slots=True)
class TablePair:
    pk: int
    compatible: bool
    llama_cpp_compatible: bool
    failed_rule: str
    rules_from: str
    checked_at: datetime
    size_ratio: float | None
    best_kind: str
    best_speedup: float | None
    best_note: str
    best_k: int | None
    best_acceptance: float | None
    best_content_type: str
    best_method: str
    predicted_speedup: float | None
    predicted_k: int | None
    predicted_method: str
    predicted_content_type: str
    verdict: str
    target_base_id: int | None
    draft_base_id: int | None
    target_class_id: int | None
    target: TableFile
    draft: TableFile
    # N of M: the draft base model's files compatible with the row's target file, of all of them (read per page
    # from the per-class counts, registry.catalog.combinations.compatible_quants; never stored on the pair).
    compatible_quants: tuple[int, int] | None = None
    # An incompatible row whose two files adapt_draft could reconcile: the API's ``adaptable`` value
    # (registry.catalog.adaptable.api_value), None otherwise. Read per page from the stored decisions.
    adaptable: dict | None = None


def fetch_rows(ids: list[int]) -> list[TablePair]:
    """These pairs in this order (a pair deleted meanwhile is left out): one query joining their files and models."""
    n_pair, n_file = len(PAIR_FIELDS), len(FILE_FIELDS)
    columns = [*PAIR_FIELDS, *(f"{side}__{c}" for side in ("target", "draft") for c in FILE_FIELDS)]
    found = {}
    for i in range(0, len(ids), BATCH):
        for r in pairs_by_id(ids[i : i + BATCH]).values_list(*columns):
            files = [
                TableFile(*(*r[start : start + n_file - 4], TableModel(*r[start + n_file - 4 : start + n_file])))
                for start in (n_pair, n_pair + n_file)
            ]
            found[r[0]] = TablePair(*r[:n_pair], *files)
    rows = [found[pk] for pk in ids if pk in found]
    # Only a partial row needs its classes read: every draft file works with every target file of an "all" row, and
    # none with any of a "none" row (M is the draft model's quant count either way).
    partial = [p for p in rows if p.verdict == Pair.VERDICT_PARTIAL]
    quants = compatible_quants([(p.pk, p.target_base_id, p.target_class_id, p.draft_base_id) for p in partial])
    for p in rows:
        m = p.draft.model.quants or 0
        p.compatible_quants = quants.get(p.pk) or ((m, m) if p.compatible else (0, m))
    # Incompatible rows failing on bos, eos or token_text only, as stored (registration decides them).
    for pk, row in for_pairs(rows, decide=False).items():
        found[pk].adaptable = api_value(row)
    return rows
