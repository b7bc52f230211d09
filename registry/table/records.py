"""The pairs table's rows as plain records (no model instances, no JSON, no token tables).

``TablePair`` and ``TableFile`` carry the attribute names of ``Pair`` and ``GGUFFile`` that the row's cells,
``serializers.pair_row`` and the CSV read, so the same code formats both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


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
    # N of M: the draft base model's files compatible with the row's target file, of all of them (not stored on the
    # pair: counted per page by the function SPECREG_TABLE_QUANT_COUNTS names, registry.table.rows).
    compatible_quants: tuple[int, int] | None = None
    # An incompatible row whose two files adapt_draft could reconcile: the API's ``adaptable`` value
    # (registry.adapt_stored.api_value), None otherwise. Read per page from the stored decisions.
    adaptable: dict | None = None
