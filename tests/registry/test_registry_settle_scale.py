"""A class new to a popular base model is settled from what its pairs hold (at scale).

A small draft is listed by nearly every target of its family, so a tokenizer class it gains (a hostile near-miss,
a re-conversion) touches thousands of pairs. Registration settles them from each pair's own columns and its
partner's classes (registry.catalog.settling, ``Gained``): statements that do not grow with the pairs, verdicts
written with one UPDATE per value, and the same verdicts and files as settling every combination again (``settle``)
gives. Runs on SQLite and (db_service) again on PostgreSQL.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inspector.compat import check_pair
from registry.catalog import stored
from registry.catalog.combinations import pair_combinations
from registry.catalog.regroup import merge
from registry.catalog.settling import settle
from registry.catalog.stored import load_info
from registry.models import BaseModel, Pair
from tests.ggufgen import vocab
from tests.registering import reg, synth

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

BIG = {"w": np.zeros((64, 64), dtype=np.float32)}  # 4,096 parameters: a target of SMALL
SMALL = {"w": np.zeros((8, 8), dtype=np.float32)}  # 64


def tokens(tag: str, **changed: str) -> list[str | bytes]:
    """A vocabulary of its own per ``tag`` (no pair across tags), with token texts changed by id (``t3000="x"``)."""
    t = vocab(5000, seed=tag)
    for key, text in changed.items():
        t[int(key[1:])] = text
    return t


def popular_draft(tmp_path, tag: str, targets: int) -> BaseModel:
    """A small draft (the publisher's file) listed by ``targets`` target base models of one file each."""
    small = reg(
        synth(tmp_path, f"{tag}-small", tokens(tag), tensors=SMALL),
        f"Org/{tag}-Small-0.5B-GGUF",
        "small-Q4_K_M.gguf",
        base_models=[f"Org/{tag}-Small"],
    )
    big = synth(tmp_path, f"{tag}-big", tokens(tag), tensors=BIG)
    for i in range(targets):
        reg(big, f"up{i}/{tag}-Big{i}-7B-GGUF", "q4.gguf", base_models=[f"Org/{tag}-Big{i}-7B"])
    assert Pair.objects.filter(draft_base=small.model.base_id).count() == targets
    return small.model.base


def register_counted(info, repo: str, name: str, card: list[str]) -> list[dict]:
    stored._tables.clear()  # token tables read from the database alike in every run
    with CaptureQueriesContext(connection) as ctx:
        reg(info, repo, f"{name}.gguf", base_models=card)
    return ctx.captured_queries


def statements(queries: list[dict]) -> list[str]:
    """The statements run, savepoints (of get_or_create and the registration's own steps) left out."""
    return [q["sql"][:150] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def pair_updates(queries: list[dict]) -> list[str]:
    return [q["sql"] for q in queries if q["sql"].startswith('UPDATE "registry_pair"')]


def assert_settled() -> None:
    """Every pair shows what settling all its combinations again gives: nothing would change."""
    pairs = list(Pair.objects.select_related("target", "draft").order_by("pk"))
    assert [(p.pk, p.verdict, p.target_id, p.draft_id) for p in settle(pairs, record=False)] == []


def test_a_class_new_to_a_popular_draft_costs_the_same_statements_whatever_its_pairs(tmp_path):
    few, many = popular_draft(tmp_path, "a", 2), popular_draft(tmp_path, "b", 30)
    runs = {}
    for tag, base in (("a", few), ("b", many)):
        # A re-conversion beside the publisher's quant, with another token text: every pair's new combination fails.
        info = synth(tmp_path, f"{tag}-text", tokens(tag, t3000="something else"), tensors=SMALL)
        runs[tag] = register_counted(info, f"Org/{tag}-Small-0.5B-GGUF", "text", [f"Org/{tag}-Small"])
        assert set(Pair.objects.filter(draft_base=base).values_list("verdict", flat=True)) == {Pair.VERDICT_PARTIAL}
    assert len(runs["a"]) == len(runs["b"]), "\n".join(q["sql"][:150] for q in runs["b"])
    assert len(statements(runs["b"])) <= 40, "\n".join(statements(runs["b"]))
    # Thirty verdicts "compatible" -> "partial": one UPDATE, not a CASE per row and column.
    updates = pair_updates(runs["b"])
    assert len(updates) == 1 and "CASE" not in updates[0]
    assert Pair.objects.get(draft_base=many, target_base__name="b-Big7-7B").draft.path == "small-Q4_K_M.gguf"

    # A class whose combinations all pass (a token below id 5 differs: llama.cpp never compares those): no write.
    info = synth(tmp_path, "b-low", tokens("b", t1="low"), tensors=SMALL)
    queries = register_counted(info, "Org/b-Small-0.5B-GGUF", "low", ["Org/b-Small"])
    # It stands as high as the shown class (one repository) and passes: its pairs are settled the whole way, in
    # batches whatever their number, and keep their files (the shown draft is the target's exact class).
    assert pair_updates(queries) == [] and len(statements(queries)) <= 45, "\n".join(statements(queries))
    assert_settled()


def test_a_newcomers_near_miss_under_a_popular_drafts_names_starts_a_model_of_its_own(tmp_path):
    base = popular_draft(tmp_path, "c", 3)
    before = list(Pair.objects.filter(draft_base=base).values_list("pk", "verdict", "draft_id", "target_id"))
    info = synth(tmp_path, "c-text", tokens("c", t3000="something else"), tensors=SMALL)
    mallory = reg(info, "mallory/c-GGUF", "text.gguf", base_models=["Org/c-Small"])
    assert mallory.model.base_id != base.pk and mallory.model.base.rule == BaseModel.RULE_REPO
    assert list(Pair.objects.filter(draft_base=base).values_list("pk", "verdict", "draft_id", "target_id")) == before
    assert_settled()


def test_the_publishers_own_class_merged_by_staff_becomes_the_shown_one_on_every_pair(tmp_path):
    # Third parties' quants first (their cards name Org as the publisher), then Org's own upload with a class of its
    # own: names alone join nothing (a model of its own), and once staff merge it, each pair shows Org's file, as
    # settling every combination would choose.
    t = reg(synth(tmp_path, "big", tokens("p"), tensors=BIG), "Org/Big-7B-GGUF", "big.gguf", base_models=["Org/Big-7B"])
    t2 = reg(
        synth(tmp_path, "big2", tokens("p"), tensors=BIG), "Org/Big2-7B-GGUF", "big2.gguf", base_models=["Org/Big2-7B"]
    )
    alice = reg(
        synth(tmp_path, "a", tokens("p"), tensors=SMALL), "alice/Small-GGUF", "a.gguf", base_models=["Org/Small-0.5B"]
    )
    assert {p.draft_id for p in Pair.objects.all()} == {alice.pk}
    org = reg(
        synth(tmp_path, "org", tokens("p", t2="low"), tensors=SMALL),
        "Org/Small-0.5B-GGUF",
        "org.gguf",
        base_models=["Org/Small-0.5B"],
    )
    assert org.tokenizer_class_id != alice.tokenizer_class_id and org.model.base_id != alice.model.base_id
    merge([alice.model.base_id, org.model.base_id])
    org.refresh_from_db()
    assert org.model.base_id == alice.model.base_id
    assert {(p.target_id, p.draft_id, p.verdict) for p in Pair.objects.filter(draft_base=alice.model.base_id)} == {
        (t.pk, org.pk, "compatible"),
        (t2.pk, org.pk, "compatible"),
    }
    # A target's publisher class merged later moves the target side the same way.
    bob = reg(
        synth(tmp_path, "bob", tokens("p", t3="x"), tensors=BIG),
        "bob/Huge-GGUF",
        "bob.gguf",
        base_models=["Org/Huge-14B"],
    )
    huge = reg(
        synth(tmp_path, "huge", tokens("p", t4="y"), tensors=BIG),
        "Org/Huge-14B-GGUF",
        "q.gguf",
        base_models=["Org/Huge-14B"],
    )
    assert huge.model.base_id != bob.model.base_id
    merge([bob.model.base_id, huge.model.base_id])
    assert Pair.objects.get(target_base=bob.model.base_id, draft_base=alice.model.base_id).target_id == huge.pk
    assert_settled()


def test_an_incompatible_pair_becomes_partial_on_the_first_compatible_class(tmp_path):
    # The target adds BOS, the draft does not: a near-miss row ("none"). A draft quant that adds BOS too makes it
    # "partial", shown on that quant (the only compatible combination).
    t = reg(
        synth(tmp_path, "big", tokens("n"), tensors=BIG, add_bos=True, bos=1),
        "Org/Big-7B-GGUF",
        "b.gguf",
        base_models=["Org/Big"],
    )
    plain = reg(
        synth(tmp_path, "s", tokens("n"), tensors=SMALL),
        "alice/Small-GGUF",
        "s-Q4_K_M.gguf",
        base_models=["Org/Small-0.5B"],
    )
    pair = Pair.objects.get()
    assert (pair.verdict, pair.compatible, pair.failed_rule) == ("incompatible", False, "bos")
    bos = reg(
        synth(tmp_path, "sb", tokens("n"), add_bos=True, bos=1, tensors=SMALL),
        "alice/Small-GGUF",
        "s-Q8_0.gguf",
        base_models=["Org/Small-0.5B"],
    )
    pair.refresh_from_db()
    assert (pair.verdict, pair.compatible, pair.target_id, pair.draft_id) == ("partial", True, t.pk, bos.pk)
    for f, ok in ((plain, False), (bos, True)):
        assert check_pair(load_info(t), load_info(f)).compatible is ok
    assert_settled()


def test_a_partner_whose_best_class_only_now_meets_the_model_is_settled_the_whole_way(tmp_path):
    # The target holds two classes (two quants of one repository): plain (first: it stands higher) and BOS added. The
    # draft's first class adds BOS, so the row shows the target's BOS quant. The draft's repository then adds a plain
    # class: the target's plain class now meets it, and the row moves to that combination (settled in full).
    plain_t = reg(
        synth(tmp_path, "t1", tokens("u"), tensors=BIG), "alice/Big-GGUF", "t-Q4_K_M.gguf", base_models=["Org/Big-7B"]
    )
    bos_t = reg(
        synth(tmp_path, "t2", tokens("u"), tensors=BIG, add_bos=True, bos=1),
        "alice/Big-GGUF",
        "t-Q8_0.gguf",
        base_models=["Org/Big-7B"],
    )
    bos_d = reg(
        synth(tmp_path, "d1", tokens("u"), add_bos=True, bos=1, tensors=SMALL),
        "carol/Small-GGUF",
        "d-Q4_K_M.gguf",
        base_models=["Org/Small-0.5B"],
    )
    pair = Pair.objects.get()
    assert (pair.verdict, pair.target_id, pair.draft_id) == ("partial", bos_t.pk, bos_d.pk)
    plain_d = reg(
        synth(tmp_path, "d2", tokens("u"), tensors=SMALL),
        "carol/Small-GGUF",
        "d-Q8_0.gguf",
        base_models=["Org/Small-0.5B"],
    )
    pair.refresh_from_db()
    assert (pair.verdict, pair.target_id, pair.draft_id) == ("partial", plain_t.pk, plain_d.pk)
    combos = pair_combinations([pair])[0].combos
    assert sorted(c.compatible for c in combos) == [False, False, True, True]
    assert_settled()
