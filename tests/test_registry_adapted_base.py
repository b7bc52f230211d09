"""An adapted draft in the registry: its own base model, "adapted from" its original, and an ordinary pair
with the target it was made for, while the original's pairs keep their verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.info import inspect_source
from registry.catalog.bases import adapted_key
from registry.catalog.registration import register
from registry.models import BaseModel, GGUFFile, Pair
from tests.models import MODELS
from tests.test_adapt_draft import adapted, made, qwen05, r1_target, rewrite  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def reg(path: Path, repo: str, name: str, etag: str = "", base_models: list[str] | None = None) -> GGUFFile:
    info = inspect_source(str(path))
    return register(
        info,
        source=f"hf://{repo}/{name}",
        repo=repo,
        path=name,
        etag=etag or f"etag-{repo}-{name}",
        size=info.file_size,
        base_models=base_models,
    ).file


def pair_of(target: GGUFFile, draft: GGUFFile) -> Pair:
    return Pair.objects.get(target_base=target.model.base, draft_base=draft.model.base)


@pytest.fixture
def files(adapted, r1_target, qwen05) -> dict[str, GGUFFile]:  # noqa: F811
    out, _ = adapted
    card = ["Qwen/Qwen2.5-Coder-0.5B-Instruct"]
    return {
        "target": reg(r1_target, "deepseek/R1-like-1.5B-GGUF", "r1-like-1.5b.gguf"),
        # the original, by its Hub sha256 (a single file's etag is its LFS hash)
        "original": reg(qwen05, "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05.gguf", MODELS["qwen05"].sha256, card),
        # uploaded with the original's card: it still joins nothing
        "adapted": reg(out, "someone/q05-for-r1-GGUF", "q05-for-r1.gguf", base_models=card),
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
    assert files["original"].get_absolute_url().replace("&", "&amp;") in section  # linked by its sha256
    assert "7 special tokens changed (bos, token_text)" in section
    assert "not a download of the original" in section
    assert "its own: a draft adapted by" in page
    assert 'id="adapted-from"' not in client.get(files["original"].get_absolute_url()).content.decode()


def test_a_claim_of_adaptation_only_sets_a_file_apart():
    claims = {"specreg.adapted.draft_sha256": "ab" * 32, "specreg.adapted.target": "hf://x/t.gguf"}
    info = {"basename": "Qwen2.5-Coder", "size_label": "0.5B", "architecture": "qwen2", "metadata": claims}
    key = adapted_key(info, "evil/repo", "f.gguf")
    assert key is not None and key.key.startswith("adapted:abababababababab:") and key.rule == "adapted"
    assert adapted_key({**info, "metadata": {"specreg.adapted.draft_sha256": "not a digest"}}, "r", "f") is None
    assert adapted_key({"metadata": {}}, "r", "f") is None


def test_a_header_only_copy_of_an_adapted_draft_never_claims_the_originals_tensor_data(client, adapted, tmp_path):
    out, _ = adapted
    fake = reg(rewrite(out, tmp_path / "fake.gguf", tensors=False), "evil/q05-for-r1-GGUF", "fake.gguf")
    page = client.get(fake.get_absolute_url()).content.decode()
    section = page.split('id="adapted-from"')[1].split("</p>")[0]
    assert "the tensor data the original" not in section and "This file holds no tensor data" in section
