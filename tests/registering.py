"""Registering GGUF files in a test: synthetic headers written here, the real small models, the Hub names they
are registered under, and the files a test starts from (a pytest plugin: tests/conftest.py names it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from inspector.info import ModelInfo, inspect_source
from registry.catalog.registration import Registered, finish, register
from registry.models import GGUFFile, Pair
from tests.ggufgen import vocab, write_gguf

Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
Q15 = "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
# A card's base model, and the weights of a big and a small synthetic file (their parameter counts order them).
CARD = ["Org/Small-0.5B"]
BIG = {"w": np.zeros((64, 64), dtype=np.float32)}  # 4,096 parameters
SMALL = {"w": np.zeros((8, 8), dtype=np.float32)}  # 64


def synth(
    tmp_path: Path,
    name: str,
    tokens: int | Sequence[str | bytes] | None = None,
    *,
    change: dict[int, str] | None = None,
    **kw,
) -> ModelInfo:
    """A synthetic GGUF ``name``.gguf read back: ``tokens`` is its vocabulary or the vocabulary's size (5,000 by
    default), ``change`` sets some tokens' texts, the rest goes to tests.ggufgen.write_gguf."""
    toks = vocab(tokens or 5000) if tokens is None or isinstance(tokens, int) else list(tokens)
    for i, t in (change or {}).items():
        toks[i] = t
    return inspect_source(str(write_gguf(tmp_path / f"{name}.gguf", tokens=toks, **kw)))


def other_text(i: int) -> list[str | bytes]:
    """The default synthetic vocabulary with token ``i``'s text changed."""
    t = vocab(5000)
    t[i] = "something else"
    return t


def register_as(
    found: ModelInfo | Path,
    repo: str,
    path: str,
    *,
    etag: str = "",
    size: int | None = None,
    finished: bool = False,
    **kw,
) -> Registered:
    """``found`` (a header's info, or a file read here) registered as the Hub file ``repo``/``path``, as an import
    registers it: its etag follows its name unless given, its size is the file's unless given. ``finished``: the job
    also ends (registry.catalog.registration.finish: the adaptability of its near-miss pairs decided)."""
    info = found if isinstance(found, ModelInfo) else inspect_source(str(found))
    r = register(
        info,
        source=f"hf://{repo}/{path}",
        repo=repo,
        path=path,
        etag=etag or f"etag-{repo}-{path}",
        size=info.file_size if size is None else size,
        **kw,
    )
    if finished:
        finish([r.file.pk])
    return r


def reg(found: ModelInfo | Path, repo: str, path: str, **kw) -> GGUFFile:
    """The registered file of ``register_as``."""
    return register_as(found, repo, path, **kw).file


@pytest.fixture(scope="session")
def infos(
    qwen05_header_path: Path, qwen15_header_path: Path, smollm2_path: Path, gemma3_header_path: Path
) -> dict[str, ModelInfo]:
    """The real models' info. The Qwen and Gemma paths are first parts where only headers were fetched (make
    test-fast) and whole files after make test: either way they stand for the whole Hub files the tests register,
    whose runs a queue accepts."""
    return {
        k: replace(inspect_source(str(p)), data_complete=True)
        for k, p in [
            ("qwen05", qwen05_header_path),
            ("qwen15", qwen15_header_path),
            ("smollm2", smollm2_path),
            ("gemma3", gemma3_header_path),
        ]
    }


@pytest.fixture
def pair(infos: dict[str, ModelInfo]) -> Pair:
    """Qwen2.5-Coder 0.5B and 1.5B and SmolLM2 registered under their Hub names: the one compatible pair, the
    Qwen one."""
    for key, repo, path in (
        ("qwen05", Q05, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        ("qwen15", Q15, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        ("smollm2", SMOL, "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ):
        register_as(infos[key], repo, path, etag=f"e-{path}", size=1)
    return Pair.objects.get(compatible=True)
