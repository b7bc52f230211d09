"""An adapted draft in the registry: its own base model, "adapted from" its verified original, and an ordinary pair
with the target it was made for, while the original's pairs keep their verdicts. A file that only claims to be
adapted (the keys, no verified provenance) is an ordinary file set apart, whoever uploads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from gguf import GGUFValueType as V

from inspector.info import inspect_source
from registry.catalog.bases import base_key
from registry.catalog.provenance import claims_adaptation
from registry.catalog.registration import register
from registry.models import BaseClass, BaseModel, GGUFFile, Model, Pair, ReportedResult
from tests.models import MODELS
from tests.near_miss import header_of, rewrite
from tests.registering import reg

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def pair_of(target: GGUFFile, draft: GGUFFile) -> Pair:
    return Pair.objects.get(target_base=target.model.base, draft_base=draft.model.base)


def reg_local(path: Path) -> GGUFFile:
    info = inspect_source(str(path))
    return register(info, source=str(path), path=str(path), etag=f"local-{path.name}", size=info.file_size).file


@pytest.fixture
def files(adapted, r1_target, qwen05) -> dict[str, GGUFFile]:
    out, result = adapted
    card = ["Qwen/Qwen2.5-Coder-0.5B-Instruct"]
    # adapt_draft read the original beside where it wrote: the copy a user downloaded with `hf download`
    beside = out.parent / Path(result["draft"]).name
    if not beside.exists():
        beside.symlink_to(qwen05)
    return {
        "target": reg(r1_target, "deepseek/R1-like-1.5B-GGUF", "r1-like-1.5b.gguf"),
        # the original, by its Hub sha256 (a single file's etag is its LFS hash)
        "original": reg(
            qwen05, "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05.gguf", etag=MODELS["qwen05"].sha256, base_models=card
        ),
        # adapted on the command line and registered from this machine: its tensor data is hashed against the copy
        "adapted": reg_local(out),
    }


def test_the_adapted_draft_is_a_base_model_of_its_own_and_the_original_keeps_its_verdict(files):
    target, original, made_ = files["target"], files["original"], files["adapted"]
    assert made_.model.base_id != original.model.base_id
    base = BaseModel.objects.get(pk=made_.model.base_id)
    assert base.rule == BaseModel.RULE_ADAPTED and base.quants == 1
    assert base.name.endswith("adapted for r1-like-1.5b.part1.gguf"), base.name
    first = BaseModel.objects.get(pk=original.model.base_id)
    assert first.quants == 1 and first.rule == BaseModel.RULE_HUB
    before = pair_of(target, original)
    assert (before.compatible, before.failed_rule) == (False, "bos")
    after = pair_of(target, made_)  # an ordinary pair: predicted, benchmarked, deployed like any other
    assert after.compatible and after.verdict == "compatible"


def test_the_model_page_says_adapted_from_what_and_never_offers_it_as_the_originals(client, files):
    page = client.get(files["adapted"].get_absolute_url()).content.decode()
    section = page.split('id="adapted-from"')[1].split("</p>")[0]
    assert "Adapted from" in page and "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" in section
    assert files["original"].get_absolute_url().replace("&", "&amp;") in section  # linked: verified
    assert "tensor data were hashed here and are the same" in section
    assert "7 special tokens changed (bos, token_text)" in section
    assert "not a download of the original" in section
    assert "its own: a draft adapted by" in page
    assert 'id="adapted-from"' not in client.get(files["original"].get_absolute_url()).content.decode()


def test_a_claim_of_adaptation_only_sets_a_file_apart():
    claims = {"specreg.adapted.draft_sha256": "ab" * 32, "specreg.adapted.target": "hf://x/t.gguf"}
    info = {"basename": "Qwen2.5-Coder", "size_label": "0.5B", "architecture": "qwen2", "metadata": claims}
    assert claims_adaptation(info)
    key = base_key(info, "evil/repo", "f.gguf", ["Qwen/Qwen2.5-Coder-0.5B-Instruct"])
    assert (key.key, key.rule) == ("repo:evil/repo/f", "repo")  # neither the names nor the card join it
    assert not claims_adaptation({**info, "metadata": {"specreg.adapted.draft_sha256": "not a digest"}})
    assert not claims_adaptation({"metadata": {}})


def test_an_adapted_file_whose_tensor_data_is_not_the_originals_is_an_ordinary_file(
    files, adapted, smollm2_path, tmp_path
):
    out, result = adapted
    # the adapted file's keys over other weights (SmolLM2's), beside a copy of the original as adapt_draft read it
    keys = {k: v for k, v in header_of(out).kv.items() if k.startswith("specreg.adapted.") and isinstance(v, str)}
    other = rewrite(smollm2_path, tmp_path / "forged.gguf", data=True, kv={k: (v, V.STRING) for k, v in keys.items()})
    (tmp_path / Path(result["draft"]).name).symlink_to(out.parent / Path(result["draft"]).name)
    forged = reg_local(other)
    assert forged.info["metadata"]["specreg.adapted.draft_sha256"] == result["draft_sha256"]
    assert forged.model.base.rule == BaseModel.RULE_REPO and forged.model.base_id != files["adapted"].model.base_id


def test_a_header_only_copy_of_an_adapted_draft_never_claims_the_originals_tensor_data(client, adapted, tmp_path):
    out, _ = adapted
    fake = reg(rewrite(out, tmp_path / "fake.gguf", tensors=False), "evil/q05-for-r1-GGUF", "fake.gguf")
    page = client.get(fake.get_absolute_url()).content.decode()
    section = page.split('id="adapted-from"')[1].split("</p>")[0]
    assert "the tensor data the original" not in section and "this file holds no tensor data" in section
    assert "specreg has not verified that" in section and "an ordinary file" in section


def test_regroup_bases_keys_an_old_adapted_model_by_what_was_verified_and_keeps_its_pair(files, adapted, tmp_path):
    out, _ = adapted
    made_, base = files["adapted"], files["adapted"].model.base
    pair = pair_of(files["target"], made_)
    # As older code keyed it (the file's own claimed hashes), with a header-only fake from another owner joined in.
    BaseModel.objects.filter(pk=base.pk).update(key=f"adapted:{'ab' * 8}:{'cd' * 8}:qwen2.5-coder-0.5b-instruct@qwen2")
    fake = reg(rewrite(out, tmp_path / "fake.gguf", tensors=False), "evil/q05-for-r1-GGUF", "fake.gguf")
    assert fake.model.base_id != base.pk  # today's rule: a claim joins nothing
    Model.objects.filter(pk=fake.model_id).update(base=base)
    BaseClass.objects.get_or_create(base=base, tokenizer_class_id=fake.tokenizer_class_id, defaults={"file": fake})
    kept = ReportedResult.objects.create(pair=pair, citation="a forum post", speedup=1.2, k=4)
    call_command("regroup_bases")
    base.refresh_from_db()
    assert base.key.startswith(f"adapted:{files['original'].pk}:") and base.rule == BaseModel.RULE_ADAPTED
    assert Model.objects.get(pk=fake.model_id).base_id != base.pk
    after = Pair.objects.get(pk=pair.pk)
    assert after.draft_id == made_.pk and after.compatible and ReportedResult.objects.filter(pk=kept.pk).exists()
