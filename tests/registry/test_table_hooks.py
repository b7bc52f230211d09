"""Code a lower layer calls is named in settings, never patched in by an app's ready(): the pair's full check, what
the table's search adds, and the N of M quants of a partial row."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db.models import Q
from django.http import QueryDict

from registry.models import Pair
from registry.table.cells import verdict_text
from registry.table.filters import filtered_pairs, search_hooks
from registry.table.records import TableFile, TableModel, TablePair
from registry.table.request import TableQuery
from registry.table.rows import add_quant_counts
from registry.team.notes import note_search_q

CALLED: list[str] = []


def pairs_numbered_seven(text: str) -> Q | None:
    """A search hook for these tests: "seven" adds the pair with id 7."""
    CALLED.append(text)
    return Q(pk=7) if text == "seven" else None


def two_of_five(rows: list[tuple[int, int | None, int | None, int | None]]) -> dict[int, tuple[int, int]]:
    return {pk: (2, 5) for pk, *_ in rows}


def table_pair(pk: int, verdict: str, compatible: bool = True) -> TablePair:
    def file(i: int) -> TableFile:
        model = TableModel(name=f"m{i}", quants=5)
        return TableFile(
            pk=i,
            source=f"/m/{i}.gguf",
            repo="",
            architecture="llama",
            parameter_count=1000,
            file_type="Q4_K",
            n_vocab=100,
            vocab_type="gpt2",
            arch_kind="plain",
            speculative_type="",
            model_id=i,
            model=model,
        )

    blank = {f"best_{c}": "" for c in ("kind", "note", "content_type", "method")}
    none = {f"{side}_{c}": None for side in ("best", "predicted") for c in ("speedup", "k")} | {"best_acceptance": None}
    return TablePair(
        pk=pk,
        compatible=compatible,
        llama_cpp_compatible=compatible,
        failed_rule="" if compatible else "bos",
        rules_from="b1",
        checked_at=datetime(2026, 1, 1, tzinfo=UTC),
        size_ratio=2.0,
        predicted_method="",
        predicted_content_type="",
        verdict=verdict,
        target_base_id=1,
        draft_base_id=2,
        target_class_id=3,
        target=file(1),
        draft=file(2),
        **blank,
        **none,
    )


def test_the_settings_name_the_hooks_and_no_app_patches_them_in():
    assert settings.SPECREG_PAIR_FULL_CHECK == "registry.catalog.pairing.full_check"
    assert settings.SPECREG_TABLE_QUANT_COUNTS == "registry.catalog.combinations.compatible_quants"
    assert search_hooks() == [note_search_q]
    assert not hasattr(Pair, "full_check")


@pytest.mark.django_db
def test_a_search_hook_named_in_settings_adds_its_pairs(settings):
    settings.SPECREG_TABLE_SEARCH_HOOKS = [f"{__name__}.pairs_numbered_seven"]
    CALLED.clear()
    sql = str(filtered_pairs(TableQuery.from_params(QueryDict("q=seven&verdict=any"))).query)
    assert CALLED == ["seven"] and '"id" = 7' in sql
    settings.SPECREG_TABLE_SEARCH_HOOKS = []
    CALLED.clear()
    sql = str(filtered_pairs(TableQuery.from_params(QueryDict("q=seven&verdict=any"))).query)
    assert CALLED == [] and '"id" = 7' not in sql


def test_a_partial_row_counts_its_quants_through_the_named_function(settings):
    settings.SPECREG_TABLE_QUANT_COUNTS = f"{__name__}.two_of_five"
    rows = [
        table_pair(1, Pair.VERDICT_PARTIAL),
        table_pair(2, Pair.VERDICT_ALL),
        table_pair(3, Pair.VERDICT_NONE, False),
    ]
    add_quant_counts(rows)
    assert [p.compatible_quants for p in rows] == [(2, 5), (5, 5), (0, 5)]
    assert verdict_text(rows[0]) == "partial: 2 of 5 draft quants"
    # Without one, a partial row says no number rather than a wrong one; the others need none.
    settings.SPECREG_TABLE_QUANT_COUNTS = ""
    rows = [table_pair(1, Pair.VERDICT_PARTIAL), table_pair(2, Pair.VERDICT_ALL)]
    add_quant_counts(rows)
    assert [p.compatible_quants for p in rows] == [None, (5, 5)]
    assert verdict_text(rows[0]) == "partial: some quants"
