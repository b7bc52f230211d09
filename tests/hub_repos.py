"""Repositories tests put on the local test Hub (tests.hub): the three real small models, an author's many
repositories to crawl, SmolLM2 alone, a near-miss pair (a pytest plugin: tests/conftest.py names it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

from registry.hub.importing import import_hf
from registry.models import GGUFFile, Pair
from tests.ggufgen import vocab, write_gguf
from tests.hub import FakeHub
from tests.registering import Q05, Q15, SMOL

SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
Q05_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
Q15_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
ORG = "team"
REPOS = [f"{ORG}/Model{n}-GGUF" for n in range(5)]
R1 = "deepseek/R1-like-1.5B-GGUF"
SMOL_SPEC = f"hf://{SMOL}/smollm2-135m-instruct-q4_1.gguf"


@pytest.fixture
def hub(fake_hub: FakeHub, smollm2_path: Path, qwen05_header_path: Path, qwen15_header_path: Path) -> FakeHub:
    """The three real models, each in its repository, with a card naming its base model and a download count."""
    fake_hub.add_repo(SMOL, {SMOL_FILE: smollm2_path, "README.md": b"# SmolLM2\n"}, downloads=50)
    fake_hub.add_repo(Q05, {Q05_FILE: qwen05_header_path}, base_model="Qwen/Qwen2.5-Coder-0.5B-Instruct", downloads=900)
    fake_hub.add_repo(Q15, {Q15_FILE: qwen15_header_path}, base_model="Qwen/Qwen2.5-Coder-1.5B-Instruct", downloads=800)
    return fake_hub


@pytest.fixture
def team_hub(fake_hub: FakeHub, tmp_path: Path) -> FakeHub:
    """Five repositories of ``team`` with two quants each, one of another author, one of ``team`` without GGUF;
    the listing answers two models a page, so every crawl pages through a cursor."""
    fake_hub.page_size = 2
    for n, repo in enumerate(REPOS):
        files = {
            f"model{n}-{q}.gguf": write_gguf(tmp_path / f"m{n}{q}.gguf", tokens=vocab(300 + n))
            for q in ("Q4_K_M", "Q8_0")
        }
        fake_hub.add_repo(repo, files)
    fake_hub.add_repo("other/Model-GGUF", {"x.gguf": write_gguf(tmp_path / "x.gguf", tokens=vocab(300))})
    fake_hub.add_repo(f"{ORG}/safetensors-only", {"model.safetensors": b"\0" * 64})
    return fake_hub


@pytest.fixture
def hub_with_smollm2(fake_hub: FakeHub, smollm2_path: Path, settings: Settings, tmp_path: Path) -> FakeHub:
    settings.SPECREG_MODEL_DIR = tmp_path / "models"
    fake_hub.add_repo(SMOL, {"smollm2-135m-instruct-q4_1.gguf": smollm2_path})
    return fake_hub


@pytest.fixture
def near_miss(fake_hub: FakeHub, r1_target: Path, qwen05: Path, settings: Settings, tmp_path: Path) -> Pair:
    """The near-miss R1-like target (a header) and the whole Qwen 0.5B draft imported from the Hub: a pair that
    fails on BOS alone, with a model folder of its own."""
    settings.SPECREG_MODEL_DIR = tmp_path / "models"
    fake_hub.add_repo(R1, {"r1-like-1.5b-Q4_K_M.gguf": r1_target})  # a header only: enough for a target
    fake_hub.add_repo(Q05, {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": qwen05})  # the whole draft
    import_hf(R1)
    import_hf(Q05)
    target, draft = GGUFFile.objects.get(model__repo=R1), GGUFFile.objects.get(model__repo=Q05)
    pair = Pair.objects.get(target_base=target.model.base, draft_base=draft.model.base)
    assert (pair.compatible, pair.failed_rule) == (False, "bos")
    return pair
