"""Which model is the target follows the best size evidence (tensor data, else the tensor list, else the header's
size label), and is decided again when better evidence arrives: header-only uploads first must not leave
DeepSeek-R1-Distill-Qwen-7B the draft of Qwen2.5-Coder-0.5B. Real headers, rewritten by gguf-py."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from inspector.info import size_label_count as label_count
from registry.catalog.sizes import DATA, LABEL, NONE, TENSORS, FileSize, model_size
from registry.models import BaseModel, Pair, VerdictChange
from tests.models import model_path
from tests.registering import reg

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

R1_CARD = ["deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"]
Q05_CARD = ["Qwen/Qwen2.5-Coder-0.5B-Instruct"]


def the_pair() -> Pair:
    return Pair.objects.select_related("target_base", "draft_base").get()


def test_the_levels_of_evidence():
    assert label_count("0.5B") == 500_000_000 and label_count("8x7B") == 56_000_000_000
    assert label_count("30B-A3B") == 30_000_000_000 and label_count("135M") == 135_000_000
    assert label_count("big") == label_count(None) == label_count("1e99B") == 0
    data, listed, label = FileSize(630_000_000, True), FileSize(7_600_000_000, False), FileSize(0, True, "70B")
    assert model_size([label, data]).evidence == DATA and model_size([label, data]).parameter_count == 630_000_000
    assert model_size([label, listed]).evidence == TENSORS
    assert model_size([label]).parameter_count == 70_000_000_000 and model_size([label]).evidence == LABEL
    assert model_size([FileSize(0, True)]).evidence == NONE


def test_header_only_files_are_oriented_by_their_size_labels(bare, client):
    r1 = reg(bare["r1"], "someone/R1-Distill-7B-header", "r1.gguf", finished=True)
    q05 = reg(bare["q05"], "someone/Coder-0.5B-header", "q05.gguf", finished=True)
    assert r1.parameter_count == q05.parameter_count == 0
    p = the_pair()
    assert p.target_id == r1.pk and p.draft_id == q05.pk  # the 7B is the target, whatever was registered first
    assert p.size_ratio == pytest.approx(14.0) and p.target_base.size_evidence == LABEL
    row = client.get("/api/pairs?verdict=all").json()["results"][0]
    assert row["size_ratio"] == 14.0
    html = client.get("/?verdict=all").content.decode()
    assert "≈7B" in html and "≈500M" in html  # never "–" for a model whose header says its size


def test_better_evidence_turns_a_pair_round_and_records_why(bare, client):
    r1_bare = reg(bare["r1_unlabelled"], "someone/R1-Distill-7B-header", "r1.gguf", base_models=R1_CARD, finished=True)
    q05 = reg(bare["q05"], "someone/Coder-0.5B-header", "q05.gguf", base_models=Q05_CARD, finished=True)
    p = the_pair()
    assert p.target_id == q05.pk  # nothing says R1's size yet: the 0.5B's label makes it the bigger
    before = client.get(f"/api/pairs/{p.pk}").json()["adaptability"]
    assert before["state"] == "refused" and before["rule"] == "vocab_size"  # "the draft has more tokens than …"
    real = reg(
        model_path("r1_7b_header"),
        "deepseek-ai/R1-Distill-Qwen-7B-GGUF",
        "r1-Q4_K_M.gguf",
        base_models=R1_CARD,
        finished=True,
    )
    assert real.model.base_id == r1_bare.model.base_id
    p = the_pair()
    assert p.target_base_id == real.model.base_id and p.draft_id == q05.pk
    assert (p.compatible, p.failed_rule) == (False, "bos")  # R1 + Qwen: the flagship near-miss, adaptable
    assert client.get(f"/api/pairs/{p.pk}").json()["adaptable"]["summary"] == "7 special tokens, BOS"
    change = VerdictChange.objects.get(pair=p)
    assert change.reason.startswith(
        "target and draft swapped: DeepSeek-R1-Distill-Qwen-7B (7.62B, from its tensor list)"
    )
    out = io.StringIO()
    call_command("find_drafts", real.source, "--no-hub", "--json", stdout=out)
    adaptable = json.loads(out.getvalue())["adaptable"]
    assert [a["draft"]["source"] for a in adaptable] == [q05.source]


def test_one_upload_cannot_flip_an_established_pair(bare):
    r1 = reg(
        model_path("r1_7b_header"),
        "deepseek-ai/R1-Distill-Qwen-7B-GGUF",
        "r1-Q4_K_M.gguf",
        base_models=R1_CARD,
        finished=True,
    )
    q05 = reg(
        model_path("qwen05", headers_only=True),
        "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        "q05.gguf",
        base_models=Q05_CARD,
        finished=True,
    )
    assert the_pair().target_id == r1.pk
    liar = reg(bare["q05_claims_70b"], "evil/Coder-0.5B-GGUF", "q05-70b.gguf", base_models=Q05_CARD, finished=True)
    assert liar.model.base_id == q05.model.base_id
    p = the_pair()
    assert p.target_id == r1.pk and p.draft_base_id == q05.model.base_id  # a label never outranks a tensor list
    assert not VerdictChange.objects.exists()


def test_recheck_pairs_sizes_an_older_registry_again(bare):
    reg(bare["r1"], "someone/R1-Distill-7B-header", "r1.gguf", finished=True)
    q05 = reg(bare["q05"], "someone/Coder-0.5B-header", "q05.gguf", finished=True)
    # as a registry made before sizes had levels left it: every size 0, the pair the wrong way round
    p = the_pair()
    BaseModel.objects.update(parameter_count=0, size_evidence="")
    Pair.objects.filter(pk=p.pk).update(
        target=p.draft, draft=p.target, target_base=p.draft_base, draft_base=p.target_base
    )
    err = io.StringIO()
    call_command("recheck_pairs", "--sizes", stdout=io.StringIO(), stderr=err)
    assert "2 models sized again; 1 pairs turned round" in err.getvalue()
    assert the_pair().draft_id == q05.pk
