"""Synthetic GGUF files for tests, written with the gguf package's own writer (and struct for hostile ones)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFEndian, GGUFValueType, GGUFWriter

BYTE_TOKENS = [f"<0x{i:02X}>" for i in range(256)]


def vocab(n: int, seed: str = "t") -> list[str | bytes]:
    """A vocabulary of ``n`` distinct tokens: 5 specials, then ``seed``-named ones."""
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<mask>"][: min(5, n)]
    return specials + [f"{seed}{i}" for i in range(len(specials), n)]


def write_gguf(
    path: Path,
    *,
    arch: str = "llama",
    tokens: list[str | bytes] | None = None,
    model: str | None = "gpt2",
    pre: str | None = "qwen2",
    add_bos: bool | None = None,
    add_eos: bool | None = None,
    bos: int | None = None,
    eos: int | None = None,
    chat_template: str | None = None,
    kv: dict[str, tuple[Any, GGUFValueType]] | None = None,
    tensors: dict[str, np.ndarray] | None = None,
    big_endian: bool = False,
    hparams: bool = True,
    merges: bool = True,
) -> Path:
    """Write a small GGUF. With ``hparams`` it carries what llama.cpp needs to load it vocab-only."""
    w = GGUFWriter(str(path), arch, endianess=GGUFEndian.BIG if big_endian else GGUFEndian.LITTLE)
    w.add_name(f"synthetic {arch}")
    if hparams:
        w.add_context_length(512)
        w.add_embedding_length(64)
        w.add_block_count(2)
        w.add_feed_forward_length(128)
        w.add_head_count(4)
        w.add_head_count_kv(4)
        w.add_layer_norm_rms_eps(1e-5)
    if model is not None:
        w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    if tokens is not None:
        w.add_token_list(tokens)
        w.add_token_types([1] * len(tokens))
        if merges and model in ("gpt2", "gemma4", None):
            w.add_token_merges(["t 1"])
        if model == "llama":
            w.add_token_scores([0.0] * len(tokens))
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    if add_eos is not None:
        w.add_add_eos_token(add_eos)
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    for key, (value, vtype) in (kv or {}).items():
        w.add_key_value(key, value, vtype)  # the writer infers array element types
    for name, arr in (tensors or {}).items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
