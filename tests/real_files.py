"""The real headers, copies of them written by gguf-py, and those registered under Hub names as an import registers
them: the files tests of pairs, orientation and benchmark forms start from (a pytest plugin: tests/conftest.py
names it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFValueType

from registry.catalog.pairing import pair_for
from registry.models import GGUFFile, Pair
from tests.models import model_path
from tests.near_miss import rewrite
from tests.registering import SMOL, reg

ORDINARY = 100_000  # an ordinary BPE token of Qwen2.5, past the vocabulary index key's prefix (4,096 ids)


@pytest.fixture(scope="module")
def headers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    q05 = model_path("qwen05", headers_only=True)
    other = rewrite(
        q05,
        tmp_path_factory.mktemp("unadaptable") / "other-coder-0.5b.part1.gguf",
        texts={ORDINARY: "not-qwen-text"},
        kv={
            "general.name": ("Other-Coder-0.5B-Instruct", GGUFValueType.STRING),
            "general.basename": ("Other-Coder", GGUFValueType.STRING),
        },
    )
    return {
        "r1": model_path("r1_7b_header"),
        "q05": q05,
        "q15": model_path("qwen15", headers_only=True),
        "other": other,
    }


@pytest.fixture
def files(headers: dict[str, Path]) -> dict[str, GGUFFile]:
    return {
        "r1": reg(headers["r1"], "deepseek/R1-Distill-Qwen-7B-GGUF", "r1-7b-Q4_K_M.gguf", finished=True),
        "q05": reg(headers["q05"], "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q05-Q4_K_M.gguf", finished=True),
        "q15": reg(headers["q15"], "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "q15-Q4_K_M.gguf", finished=True),
        "other": reg(headers["other"], "someone/Other-Coder-0.5B-GGUF", "other-Q4_K_M.gguf", finished=True),
    }


def pair_of(target: GGUFFile, draft: GGUFFile) -> Pair:
    return Pair.objects.get(target_base=target.model.base, draft_base=draft.model.base)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Metadata-only copies (no tensors, so no parameter count): with and without their size label."""
    out = tmp_path_factory.mktemp("bare")
    r1, q05 = model_path("r1_7b_header"), model_path("qwen05", headers_only=True)
    return {
        "r1": rewrite(r1, out / "r1.gguf", tensors=False),
        "r1_unlabelled": rewrite(r1, out / "r1-nolabel.gguf", tensors=False, drop=("general.size_label",)),
        "q05": rewrite(q05, out / "q05.gguf", tensors=False),
        "q05_claims_70b": rewrite(
            q05, out / "q05-70b.gguf", tensors=False, kv={"general.size_label": ("70B", GGUFValueType.STRING)}
        ),
    }


WHOLE = "SmolLM2-135M-Instruct.Q4_1.gguf"


HEADER = "SmolLM2-135M-Instruct.Q8_0.gguf"  # its header alone: what a stand-in Hub served as a 2 MB file


@pytest.fixture(scope="module")
def header_path(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's metadata with no tensors: llama.cpp stops at "tensor 'token_embd.weight' not found"."""
    return rewrite(smollm2_path, tmp_path_factory.mktemp("header") / HEADER, tensors=False)


@pytest.fixture
def smol(smollm2_path: Path, header_path: Path) -> dict:
    """One base model with two quants on the Hub: the whole file and a header alone; its pair with itself."""
    whole, header = reg(smollm2_path, SMOL, WHOLE), reg(header_path, SMOL, HEADER)
    assert whole.model.base_id == header.model.base_id
    return {"whole": whole, "header": header, "pair": pair_for(whole, whole)}
