"""The pairs table's rows read from stored columns: one narrow query for a page's pairs with their files and
models, the stored adaptability decisions, the stored best figure (or the best matching one when filters look inside
results). Nothing here decides a verdict.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

from registry.adapt_stored import api_value, stored_for_pairs
from registry.bulk_sql import id_in
from registry.hooks import named
from registry.models import Pair
from registry.results.figures import Figure, best, figures_for
from registry.table.cells import Row
from registry.table.records import TableFile, TableModel, TablePair
from registry.table.request import TableQuery

QuantCounts = Callable[[list[tuple[int, int | None, int | None, int | None]]], dict[int, tuple[int, int]]]


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
    add_quant_counts(rows)
    # Incompatible rows failing on bos, eos or token_text only, as stored (registration decides them).
    for pk, row in stored_for_pairs(rows).items():
        found[pk].adaptable = api_value(row)
    return rows


def add_quant_counts(rows: list[TablePair]) -> None:
    """Each row's N of M draft quants. Only a partial row needs its classes read: every draft file works with every
    target file of an "all" row, and none with any of a "none" row (M is the draft model's quant count either way).

    N of a partial row is stored nowhere (it depends on the target file the row shows against each of the draft
    model's classes): the function ``SPECREG_TABLE_QUANT_COUNTS`` names counts it (the catalog's, above the table);
    without one a partial row says "some quants"."""
    partial = [p for p in rows if p.verdict == Pair.VERDICT_PARTIAL]
    count: QuantCounts | None = named("SPECREG_TABLE_QUANT_COUNTS") if partial else None
    quants = count([(p.pk, p.target_base_id, p.target_class_id, p.draft_base_id) for p in partial]) if count else {}
    for p in rows:
        m = p.draft.model.quants or 0
        unknown = count is None and p.verdict == Pair.VERDICT_PARTIAL
        p.compatible_quants = quants.get(p.pk) or (None if unknown else (m, m) if p.compatible else (0, m))


def rows_for(ids: list[int], tq: TableQuery) -> list[Row]:
    """The rows of these pairs in this order: one narrow query, and one for results when filters look inside them."""
    items = fetch_rows(ids)
    if not tq.filters_results:
        return [Row(p, stored_best(p)) for p in items]
    figs = figures_for([p.pk for p in items], **tq.result_filters)
    return [Row(p, best(figs[p.pk])) for p in items]


def stored_best(p: Pair | TablePair) -> Figure | None:
    """The best figure as copied onto the pair row (registry.results.figures.refresh_best), None where it has none."""
    if not p.best_kind:
        return None
    return Figure(
        p.best_kind,
        p.best_k or 0,
        p.best_acceptance,
        p.best_speedup,
        p.best_content_type,
        "",
        "",
        method=p.best_method or "draft-simple",
        note=p.best_note,
    )
