"""Registering files: stored inspection, shared token tables, candidates by vocabulary key, exact checks, pairs."""

from __future__ import annotations

import pytest

from inspector.info import inspect_source
from registry.catalog.pairing import candidates
from registry.catalog.registration import register
from registry.catalog.stored import load_info
from registry.jsonsafe import json_safe
from registry.models import Family, GGUFFile, Model, Pair, ReportedResult, TokenTable
from registry.results.examples import apply_reported_examples
from registry.results.figures import refresh_best
from tests.registering import register_as, synth

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


@pytest.fixture(autouse=True)
def _fresh_cache():
    from django.core.cache import cache

    cache.clear()  # cached table pages and facets must not leak between tests


@pytest.fixture(scope="session")
def real_infos(qwen05_header_path, qwen15_header_path, smollm2_path, gemma3_header_path):
    return {
        k: inspect_source(str(p))
        for k, p in [
            ("qwen05", qwen05_header_path),
            ("qwen15", qwen15_header_path),
            ("smollm2", smollm2_path),
            ("gemma3", gemma3_header_path),
        ]
    }


def test_it_pairs_the_real_qwen_coder_files_with_the_bigger_one_as_target(real_infos):
    register_as(real_infos["qwen05"], "org/small-GGUF", "small-Q4_K_M.gguf", size=1000)
    r = register_as(real_infos["qwen15"], "org/big-GGUF", "big-Q4_K_M.gguf", size=1000)
    assert r.status == "added" and r.pairs_added == 1
    pair = Pair.objects.get()
    assert pair.target.source.endswith("big-Q4_K_M.gguf") and pair.draft.source.endswith("small-Q4_K_M.gguf")
    assert pair.compatible and pair.failed_rule == "" and pair.rules_from == "b11434"
    assert [c["rule"] for c in pair.result["checks"]][-1] == "token_text"
    assert pair.size_ratio == pytest.approx(1777088000 / 630167424)


def test_it_stores_each_distinct_token_table_once(real_infos):
    register_as(real_infos["qwen05"], "org/a-GGUF", "a-Q4_K_M.gguf", size=1000)
    register_as(real_infos["qwen15"], "org/b-GGUF", "b-Q4_K_M.gguf", size=1000)
    register_as(real_infos["smollm2"], "org/c-GGUF", "c-Q4_K_M.gguf", size=1000)
    assert TokenTable.objects.count() == 2
    qwen = TokenTable.objects.get(count=151_936)
    assert qwen.files.count() == 2 and qwen.sha256 == real_infos["qwen05"].tokens.sha256


def test_it_groups_files_into_models_and_families(real_infos):
    register_as(real_infos["qwen05"], "org/a-GGUF", "a-Q4_K_M.gguf", size=1000)
    register_as(real_infos["qwen15"], "org/b-GGUF", "b-Q4_K_M.gguf", size=1000)
    register_as(real_infos["gemma3"], "org/g-GGUF", "g-Q4_K_M.gguf", size=1000)
    assert Model.objects.count() == 3
    qwen_family = Family.objects.get(models__name="a")
    assert qwen_family.vocab_type == "bpe" and "~152k tokens" in qwen_family.name
    assert set(qwen_family.models.values_list("name", flat=True)) == {"a", "b"}


def test_it_does_not_pair_files_whose_vocabularies_cannot_match(real_infos):
    register_as(real_infos["qwen05"], "org/q-GGUF", "q-Q4_K_M.gguf", size=1000)
    register_as(real_infos["smollm2"], "org/s-GGUF", "s-Q4_K_M.gguf", size=1000)
    register_as(real_infos["gemma3"], "org/g-GGUF", "g-Q4_K_M.gguf", size=1000)
    assert Pair.objects.count() == 0


def test_it_pairs_vocabularies_that_differ_by_up_to_128_tokens(tmp_path):
    register_as(synth(tmp_path, "base", 5000), "org/base-GGUF", "base-Q4_K_M.gguf", size=1000)
    register_as(synth(tmp_path, "plus128", 5128), "org/plus128-GGUF", "plus128-Q4_K_M.gguf", size=1000)
    register_as(synth(tmp_path, "plus129", 5129), "org/plus129-GGUF", "plus129-Q4_K_M.gguf", size=1000)
    pairs = {
        (p.target.model.name, p.draft.model.name): p
        for p in Pair.objects.select_related("target__model", "draft__model")
    }
    assert pairs[("plus128", "base")].compatible
    assert pairs[("plus129", "plus128")].compatible  # 1 apart
    assert ("plus129", "base") not in pairs  # 129 apart: not even a candidate


def test_it_records_the_first_failing_rule_of_a_candidate(tmp_path):
    register_as(synth(tmp_path, "base"), "org/base-GGUF", "base-Q4_K_M.gguf", size=1000)
    register_as(
        synth(tmp_path, "late", change={4500: "different"}), "org/late-GGUF", "late-Q4_K_M.gguf", size=1000
    )  # same key: texts agree below 4096
    register_as(synth(tmp_path, "bos", add_bos=True, bos=1), "org/bos-GGUF", "bos-Q4_K_M.gguf", size=1000)
    failed = {
        p.draft.model.name if p.draft.model.name != "base" else p.target.model.name: p.failed_rule
        for p in Pair.objects.select_related("target__model", "draft__model")
        if "base" in (p.target.model.name, p.draft.model.name)
    }
    assert failed == {"late": "token_text", "bos": "bos"}
    late = Pair.objects.get(
        failed_rule="token_text", target__model__name__in=["base", "late"], draft__model__name__in=["base", "late"]
    )
    assert late.result["first_mismatch_token_id"] == 4500


def test_small_vocabularies_are_found_by_type_and_size(tmp_path):
    register_as(synth(tmp_path, "tiny", 100), "org/tiny-GGUF", "tiny-Q4_K_M.gguf", size=1000)
    register_as(synth(tmp_path, "tiny2", 200), "org/tiny2-GGUF", "tiny2-Q4_K_M.gguf", size=1000)
    pair = Pair.objects.get()
    assert pair.compatible and {pair.target.n_vocab, pair.draft.n_vocab} == {100, 200}
    assert pair.target.vocab_key == "bpe:small"


def test_reregistering_an_unchanged_file_does_nothing(real_infos):
    first = register_as(real_infos["qwen05"], "org/q-GGUF", "q-Q4_K_M.gguf", size=1000)
    again = register_as(real_infos["qwen05"], "org/q-GGUF", "q-Q4_K_M.gguf", size=1000)
    assert again.status == "unchanged" and again.file.pk == first.file.pk
    assert again.file.inspected_at == first.file.inspected_at


def test_a_changed_file_is_reinspected_and_keeps_its_pairs_and_reported_results(tmp_path):
    register_as(synth(tmp_path, "t", 5000, arch="llama"), "org/t-GGUF", "t-Q4_K_M.gguf", size=1000)
    register_as(synth(tmp_path, "d", 5000), "org/d-GGUF", "d-Q4_K_M.gguf", size=10)
    pair = Pair.objects.get()
    ReportedResult.objects.create(pair=pair, k=4, acceptance=0.7, speedup=1.5, content_type="code", citation="a blog")
    refresh_best(pair)
    # The draft is replaced by a version whose late token differs: the pair turns incompatible.
    r = register_as(
        synth(tmp_path, "d2", 5000, change={4999: "other"}), "org/d-GGUF", "d-Q4_K_M.gguf", etag="etag-new", size=10
    )
    assert r.status == "updated" and r.pairs_updated == 1 and r.pairs_added == 0
    pair.refresh_from_db()
    assert not pair.compatible and pair.failed_rule == "token_text"
    assert pair.reported_results.count() == 1 and pair.best_speedup == 1.5
    assert GGUFFile.objects.count() == 2


def test_candidates_come_from_the_vocabulary_index(tmp_path, real_infos):
    q = register_as(real_infos["qwen05"], "org/q-GGUF", "q-Q4_K_M.gguf", size=1000).file
    register_as(real_infos["qwen15"], "org/q15-GGUF", "q15-Q4_K_M.gguf", size=1000)
    register_as(real_infos["smollm2"], "org/s-GGUF", "s-Q4_K_M.gguf", size=1000)
    assert [f.model.name for f in candidates(q)] == ["q15"]


def test_a_stored_file_checks_exactly_like_a_fresh_inspection(real_infos):
    from inspector.compat import check_pair

    f5 = register_as(real_infos["qwen05"], "org/q5-GGUF", "q5-Q4_K_M.gguf", size=1000).file
    f15 = register_as(real_infos["qwen15"], "org/q15-GGUF", "q15-Q4_K_M.gguf", size=1000).file
    stored = check_pair(load_info(f15), load_info(f5)).to_dict()
    fresh = check_pair(real_infos["qwen15"], real_infos["qwen05"]).to_dict()
    for d in (stored, fresh):
        d["target"].pop("source"), d["draft"].pop("source")
    assert stored == fresh


def test_nul_characters_are_kept_visible_for_postgresql():
    assert json_safe({"a\x00": ["x\x00y", 1]}) == {"a\\x00": ["x\\x00y", 1]}


def test_reported_examples_attach_to_registered_pairs_of_their_repos(real_infos):
    register(
        real_infos["qwen05"],
        source="hf://Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/q05.gguf",
        repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        path="q05.gguf",
    )
    # The 1.5B's header stands in for the 32B (same tokenizer): the shipped figures are for 32B + a small draft.
    register(
        real_infos["qwen15"],
        source="hf://Qwen/Qwen2.5-Coder-32B-Instruct-GGUF/q32.gguf",
        repo="Qwen/Qwen2.5-Coder-32B-Instruct-GGUF",
        path="q32.gguf",
    )
    assert apply_reported_examples() == 2
    assert apply_reported_examples() == 0
    pair = Pair.objects.get()
    assert pair.best_kind == "reported" and pair.best_k == 16 and pair.best_speedup == pytest.approx(1.623)
    assert {r.source_url for r in pair.reported_results.all()} == {
        "https://www.reddit.com/r/LocalLLaMA/comments/1gzm93o/"
    }
