"""A base model is named, shown and searched by its headers' name whichever of its files a row shows (local files
named qwen-addeos.gguf and dsr1.gguf included); the row's draft is the target's own class within equal standing; a
family's name does not depend on which of its vocabulary sizes came first. Real headers, rewritten by gguf-py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.test import Client

from registry.catalog.local_files import register_local
from registry.models import Family, GGUFFile, Pair
from tests.models import model_path
from tests.near_miss import rewrite

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("local")
    q05, q15 = model_path("qwen05", headers_only=True), model_path("qwen15", headers_only=True)
    return {
        "dsr1": Path(shutil.copy(model_path("r1_7b_header"), out / "dsr1.gguf")),
        # Qwen pads its vocabulary: 64 more padding tokens are another tokenizer class, still compatible
        "padded": rewrite(q05, out / "qwen-addeos.gguf", n_tokens=151_936 + 64),
        "plain": Path(shutil.copy(q05, out / "qwen25coder-0.5b.gguf")),
        "q15": Path(shutil.copy(q15, out / "coder-1.5b.gguf")),
    }


def found(query: str) -> int:
    return Client().get("/api/pairs", {"verdict": "any", "q": query}).json()["count"]


def test_rows_name_and_search_the_model_not_the_file(local):
    for key in ("dsr1", "padded", "plain", "q15"):
        register_local(local[key])
    names = {r["target_name"] for r in Pair.objects.values("target_name")} | {
        r["draft_name"] for r in Pair.objects.values("draft_name")
    }
    assert "qwen-addeos" not in names and "qwen25coder-0.5b" not in names
    assert "Qwen2.5-Coder-0.5B-Instruct" in names
    html = Client().get("/?verdict=any").content.decode()
    assert ">qwen-addeos<" not in html and "Qwen2.5-Coder-0.5B-Instruct" in html
    for query in ("deepseek", "DeepSeek-R1", "qwen2.5", "Qwen2.5-Coder-0.5B"):
        assert found(query) > 0, query


def test_the_row_shows_the_targets_own_class_within_equal_standing(local):
    register_local(local["padded"])  # first: the earliest registered would have won
    register_local(local["plain"])
    register_local(local["q15"])
    p = Pair.objects.select_related("draft", "target").get(draft__n_vocab__lt=152_000, target__n_vocab=151_936)
    plain = GGUFFile.objects.get(source=str(local["plain"].resolve()))
    assert p.draft_id == plain.pk and p.draft.tokenizer_class_id == p.target.tokenizer_class_id


def test_a_familys_name_does_not_say_the_first_files_size(local):
    register_local(local["padded"])  # 152,000 tokens first
    register_local(local["dsr1"])  # 152,064
    register_local(local["plain"])  # 151,936
    names = set(Family.objects.values_list("name", flat=True))
    assert all("~152k tokens" in n for n in names) and not any("152,000" in n for n in names)
