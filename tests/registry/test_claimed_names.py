"""Names are claims: an upload joins a base model only on evidence its uploader cannot simply write, and a row's
files follow standing before compatibility. The near-miss clone of a security review (the Qwen 0.5B draft with
R1-Distill's special tokens, no adapt_draft keys, its card naming Qwen's model) changes nothing of the existing
pair; staff merge a variant they judge to be the same model, and ``regroup_bases`` undoes old joins by names,
keeping every result. Runs on SQLite and (db_service) again on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client

from inspector.info import inspect_source
from registry.catalog.bases import base_key
from registry.catalog.registration import register
from registry.catalog.regroup import regroup_all
from registry.catalog.settling import resettle
from registry.models import BaseClass, BaseModel, GGUFFile, Model, Pair, ReportedResult
from tests.models import MODELS
from tests.near_miss import header_of, rewrite
from tests.registering import reg

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

CARD = ["Qwen/Qwen2.5-Coder-0.5B-Instruct"]
Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"


@pytest.fixture
def clone(adapted, tmp_path) -> Path:
    """The adapted draft's header without adapt_draft's keys: a near-miss variant that claims Qwen's names."""
    out, _ = adapted
    keys = tuple(k for k in header_of(out).kv if k.startswith("specreg.adapted."))
    return rewrite(out, tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", drop=keys, tensors=False)


@pytest.fixture
def near_miss(r1_target, qwen05) -> Pair:
    target = reg(r1_target, "deepseek/R1-like-1.5B-GGUF", "r1-like-1.5b-Q4_K_M.gguf", finished=True)
    draft = reg(
        qwen05,
        Q05,
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        base_models=CARD,
        etag=MODELS["qwen05"].sha256,
        finished=True,
    )
    pair = Pair.objects.get(target_base=target.model.base, draft_base=draft.model.base)
    assert (pair.verdict, pair.failed_rule) == ("incompatible", "bos")
    return pair


def shown(pair: Pair) -> tuple:
    p = Pair.objects.get(pk=pair.pk)
    return (p.verdict, p.compatible, p.failed_rule, p.target_id, p.draft_id, p.best_note)


def test_an_uploaded_near_miss_clone_changes_nothing_of_the_existing_pair(client, near_miss, clone):
    before, page = shown(near_miss), client.get(near_miss.get_absolute_url()).content.decode()
    assert "Adapt the draft" in page or "adapt_draft" in page
    evil = reg(
        clone,
        "attacker/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        base_models=CARD,
        finished=True,
    )
    # its names claim Qwen's model; its token table is one Qwen's model never had: a model of its own
    assert evil.model.base_id != near_miss.draft_base_id and evil.model.base.rule == BaseModel.RULE_REPO
    assert shown(near_miss) == before
    after = client.get(near_miss.get_absolute_url()).content.decode()
    assert "attacker/" not in after and "adapt_draft" in after
    # its own row with the target is what it is: compatible, under its own repository's name
    own = Pair.objects.get(target_base=near_miss.target_base_id, draft_base=evil.model.base_id)
    assert own.verdict == "compatible" and own.draft_id == evil.pk


def test_standing_decides_before_compatibility_within_one_base_model(near_miss, clone, qwen05):
    # The same clone inside Qwen's base model (how older code grouped it): the row still shows Qwen's own file,
    # because Qwen's class stands higher (the card names Qwen; two owners uploaded it) than one uploader's variant.
    reg(qwen05, "bartowski/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05-Q4_K_M.gguf", base_models=CARD, finished=True)
    evil = reg(
        clone,
        "attacker/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        base_models=CARD,
        finished=True,
    )
    join_by_names(evil, near_miss.draft_base_id)
    p = Pair.objects.get(pk=near_miss.pk)
    assert p.verdict == "partial" and p.draft.repo == Q05 and not p.compatible


def join_by_names(f: GGUFFile, base_id: int) -> None:
    """What older code did: the file's model joined the base model its names claim."""
    old = f.model.base_id
    Model.objects.filter(pk=f.model_id).update(base_id=base_id)
    BaseClass.objects.get_or_create(base_id=base_id, tokenizer_class_id=f.tokenizer_class_id, defaults={"file": f})
    resettle([base_id, old])


def test_regroup_bases_moves_an_old_join_by_names_out_and_keeps_the_pairs_results(near_miss, clone):
    evil = reg(
        clone,
        "attacker/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        base_models=CARD,
        finished=True,
    )
    join_by_names(evil, near_miss.draft_base_id)
    taken = Pair.objects.get(pk=near_miss.pk)
    assert taken.draft_id == evil.pk  # older code: the attacker's file was the row's draft
    kept = ReportedResult.objects.create(pair=taken, citation="a forum post", speedup=1.5, k=4)
    assert (
        regroup_all(dry_run=True).moved_out and Model.objects.get(pk=evil.model_id).base_id == near_miss.draft_base_id
    )
    call_command("regroup_bases")
    assert Model.objects.get(pk=evil.model_id).base_id != near_miss.draft_base_id
    p = Pair.objects.get(pk=near_miss.pk)
    assert (p.verdict, p.draft.repo) == ("incompatible", Q05) and ReportedResult.objects.filter(pk=kept.pk).exists()
    assert regroup_all(dry_run=True).moved_out == []  # done once: nothing more to move


def test_staff_with_change_permission_merge_a_variant_into_the_model_it_claims(near_miss, clone):
    evil = reg(
        clone,
        "attacker/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        base_models=CARD,
        finished=True,
    )
    ids = [near_miss.draft_base_id, evil.model.base_id]
    url = "/admin/registry/basemodel/"
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_basemodel"))
    c = Client()
    c.force_login(viewer)
    c.post(url, {"action": "merge_into_oldest", "_selected_action": ids})
    assert Model.objects.get(pk=evil.model_id).base_id == evil.model.base_id
    editor = User.objects.create_user("editor", password="pw", is_staff=True)
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_basemodel", "change_basemodel"]))
    c.force_login(editor)
    c.post(url, {"action": "merge_into_oldest", "_selected_action": ids})
    assert Model.objects.get(pk=evil.model_id).base_id == near_miss.draft_base_id
    assert Pair.objects.get(pk=near_miss.pk).verdict == "partial"


def test_a_local_file_is_the_operators_and_joins_by_its_names(near_miss, clone):
    info = inspect_source(str(clone))
    f = register(info, source=str(clone), path=str(clone), etag="local", size=info.file_size).file
    assert f.model.base_id == near_miss.draft_base_id
    assert base_key(f.info, "", str(clone)).rule == BaseModel.RULE_HEADER
