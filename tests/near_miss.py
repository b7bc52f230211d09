"""Near-miss GGUF files written with gguf-py from the real ones (never with the code under test): another family's
special tokens and BOS flag, keys set or dropped, a vocabulary cut or padded; the adapt_draft command as a user runs
it, and the near-miss targets and adapted drafts tests start from (a pytest plugin: tests/conftest.py names it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFEndian, GGUFValueType, GGUFWriter

from inspector.gguf_header import ArrayRef, Header, read_header
from inspector.sources import FileSource
from tests.models import model_path

ROOT = Path(__file__).resolve().parent.parent


V = GGUFValueType
TOKENS, TYPES = "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"
CONTROL, USER_DEFINED = 3, 4

# DeepSeek-R1-Distill-Qwen's special tokens where Qwen2.5 has its own (read from the real 7B header).
R1_TEXTS = {
    151643: "<｜end▁of▁sentence｜>",
    151644: "<｜User｜>",
    151645: "<｜Assistant｜>",
    151646: "<｜begin▁of▁sentence｜>",
    151647: "<|EOT|>",
    151648: "<think>",
    151649: "</think>",
}
R1_TYPES = {151648: USER_DEFINED, 151649: USER_DEFINED}
R1_KV = {
    "tokenizer.ggml.pre": ("deepseek-r1-qwen", V.STRING),
    "tokenizer.ggml.add_bos_token": (True, V.BOOL),
    "tokenizer.ggml.add_eos_token": (False, V.BOOL),
    "tokenizer.ggml.bos_token_id": (151646, V.UINT32),
    "tokenizer.ggml.eos_token_id": (151643, V.UINT32),
    "tokenizer.ggml.padding_token_id": (151654, V.UINT32),
}
QWEN_TEXTS = [
    b"<|endoftext|>",
    b"<|im_start|>",
    b"<|im_end|>",
    b"<|object_ref_start|>",
    b"<|object_ref_end|>",
    b"<|box_start|>",
    b"<|box_end|>",
]


def header_of(path: Path) -> Header:
    with FileSource.open(path) as src:
        return read_header(src)


def strings_of(h: Header, ref: ArrayRef) -> list[bytes]:
    assert ref.offsets is not None
    out = []
    for o in ref.offsets:
        n = int.from_bytes(h.buf[o : o + 8], "little")
        out.append(h.buf[o + 8 : o + 8 + n])
    return out


def nbytes(shape: tuple[int, ...], ggml_type: int) -> int:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    return int(np.prod(shape)) // block * size


NUMPY_TYPES = {
    V.UINT8: "<u1",
    V.INT8: "<i1",
    V.UINT16: "<u2",
    V.INT16: "<i2",
    V.UINT32: "<u4",
    V.INT32: "<i4",
    V.FLOAT32: "<f4",
    V.BOOL: "<u1",
    V.UINT64: "<u8",
    V.INT64: "<i8",
    V.FLOAT64: "<f8",
}


def rewrite(
    src: Path,
    out: Path,
    *,
    texts: dict[int, str] | None = None,
    types: dict[int, int] | None = None,
    kv: dict[str, tuple] | None = None,
    drop: tuple[str, ...] = (),
    n_tokens: int | None = None,
    data: bool = False,
    alignment: int | None = None,
    arch: str | None = None,
    big_endian: bool = False,
    tensors: bool = True,
) -> Path:
    """A copy of a real GGUF written by gguf-py: other token texts or types, keys set or dropped, the vocabulary cut
    or padded (as Qwen pads it: "[PADi]", UNUSED). With ``data`` every tensor's bytes follow; without, the file is a
    first part of a big one (the header, its padding and the start of the data), as a TARGET may be. Without
    ``tensors`` the file lists none: its metadata alone, which llama.cpp loads vocabulary-only (a first part's tensors
    lie past its end, which even a vocabulary-only load refuses)."""
    h = header_of(src)
    kv = kv or {}
    tokens = strings_of(h, h.kv[TOKENS])
    ref = h.kv[TYPES]
    token_types = np.frombuffer(h.buf, "<i4", ref.count, ref.start).tolist()
    n = len(tokens) if n_tokens is None else n_tokens
    tokens = (tokens + [f"[PAD{i}]".encode() for i in range(len(tokens), n)])[:n]
    token_types = (token_types + [5] * (n - len(token_types)))[:n]
    for i, t in (texts or {}).items():
        tokens[i] = t.encode()
    for i, t in (types or {}).items():
        token_types[i] = t
    w = GGUFWriter(
        str(out), arch or h.kv["general.architecture"], endianess=GGUFEndian.BIG if big_endian else GGUFEndian.LITTLE
    )
    if alignment:
        w.add_custom_alignment(alignment)
    for key, value in h.kv.items():
        if key in ("general.architecture", "general.alignment") or key in drop or key in kv:
            continue
        if key == TOKENS:
            w.add_key_value(key, tokens, V.ARRAY, V.STRING)
        elif key == TYPES:
            w.add_key_value(key, token_types, V.ARRAY, V.INT32)
        elif isinstance(value, ArrayRef) and value.type == V.STRING:  # the merges
            w.add_key_value(key, strings_of(h, value), V.ARRAY, V.STRING)
        elif isinstance(value, ArrayRef):  # numbers (Gemma's token scores)
            numbers = np.frombuffer(h.buf, NUMPY_TYPES[V(value.type)], value.count, value.start).tolist()
            w.add_key_value(key, numbers, V.ARRAY, V(value.type))
        else:
            w.add_key_value(key, value, V(h.kv_types[key]))
    for key, (value, vtype, *sub) in kv.items():
        w.add_key_value(key, value, vtype, sub[0] if sub else None)
    for t in h.tensors if tensors else ():
        size = nbytes(t.shape, t.type)
        w.add_tensor_info(t.name, tuple(reversed(t.shape)), np.dtype(np.float32), size, GGMLQuantizationType(t.type))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    if data:
        mm = np.memmap(src, np.uint8, mode="r")
        for t in h.tensors:
            start = h.data_offset + t.offset
            w.write_tensor_data(mm[start : start + nbytes(t.shape, t.type)])
        del mm
    w.close()
    if not data:
        with open(out, "ab") as f:
            f.write(b"\0" * (-f.tell() % (alignment or 32) + 4096))
    return out


def r1_like(src: Path, out: Path, **kw) -> Path:
    """Qwen2.5 with DeepSeek-R1-Distill's special tokens, BOS flag and padded vocabulary (152,064 tokens)."""
    kw.setdefault("n_tokens", 152_064)
    return rewrite(src, out, texts={**R1_TEXTS, **kw.pop("texts", {})}, types=R1_TYPES, kv=R1_KV, **kw)


def adapt_draft(*args: object, check: int | None = None) -> subprocess.CompletedProcess[str]:
    """``manage.py adapt_draft`` as a user runs it."""
    p = subprocess.run(
        [sys.executable, "manage.py", "adapt_draft", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


@pytest.fixture(scope="module")
def qwen05() -> Path:
    return model_path("qwen05")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("near-miss")


@pytest.fixture(scope="module")
def r1_target(made: Path) -> Path:
    """A header-only near-miss target: the real Qwen2.5-Coder-1.5B header given R1-Distill's special tokens."""
    return r1_like(model_path("qwen15", headers_only=True), made / "r1-like-1.5b.part1.gguf")


@pytest.fixture(scope="module")
def adapted(tmp_path_factory: pytest.TempPathFactory, r1_target: Path, qwen05: Path) -> tuple[Path, dict]:
    """The Qwen 0.5B draft adapted to ``r1_target`` by the command, and its JSON report."""
    out = tmp_path_factory.mktemp("adapted") / "qwen05-for-r1.gguf"
    p = adapt_draft(r1_target, qwen05, "--output", out, "--json", check=0)
    return out, json.loads(p.stdout)
