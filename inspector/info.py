"""The inspector's typed view of a GGUF file: model facts, tokenizer (stored and effective), arch kind."""

from __future__ import annotations

import math
import os
import re
import struct
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from . import llama_rules, speculative
from .ggml_constants import GGML_TYPE_NAMES, LLAMA_FTYPE_NAMES, GGUFValueType
from .gguf_header import ArrayRef, GGUFError, Header, read_header
from .hub_names import shard_names
from .sources import DeadlineExceeded, SourceError, is_remote, open_source
from .tokens import TokenTable, readable, vocab_key

if TYPE_CHECKING:
    from .deadlines import Deadline

DEFAULT_MAX_HEADER = 256 * 1024 * 1024
INT64_MAX = 2**63 - 1  # what a database's BIGINT holds


class InspectError(Exception):
    """Any reason a source cannot be inspected, as one line naming the source."""


class InspectTimeout(InspectError):
    """The remote reads ran past SPECREG_HEADER_DEADLINE_SECONDS (a web request answers 504)."""


@dataclass
class SpecialToken:
    id: int
    text: str | None  # None when the id lies outside the vocabulary


@dataclass
class TokenizerInfo:
    model: str | None
    pre: str | None
    n_tokens: int
    vocab_type: str
    add_bos_stored: bool | None
    add_eos_stored: bool | None
    add_bos: bool
    add_eos: bool
    bos_id: int  # effective, -1 for none
    eos_id: int
    bos_defaulted: bool
    eos_defaulted: bool
    special: dict[str, SpecialToken]  # bos/eos/eot/pad/unk… as stored, with texts
    chat_template: str | None
    vocab_key: str
    table_sha256: str | None
    load_error: str | None


@dataclass
class ModelInfo:
    source: str
    gguf_version: int
    byteorder: str
    architecture: str
    arch_kind: str  # transformer / recurrent / hybrid / diffusion
    name: str | None
    basename: str | None
    size_label: str | None
    file_type: str | None  # quantization, e.g. Q4_K_M
    parameter_count: int
    context_length: int | None
    block_count: int | None
    expert_count: int | None
    expert_used_count: int | None
    n_tensors: int
    split_count: int
    header_size: int
    data_offset: int
    file_size: int | None
    bytes_fetched: int
    tokenizer: TokenizerInfo | None
    tensor_types: dict[str, int]  # tensor count per ggml type
    metadata: dict[str, Any]  # every key, JSON-safe (large arrays summarised)
    # Every tensor's data lies inside its file (each shard's own); False: cut short (an unfinished
    # download), None: a file's size is unknown. Records stored before it existed read None.
    data_complete: bool | None = None
    # The speculation method the file offers as llama.cpp's -md (inspector.speculative); None: none.
    speculative_type: str | None = None
    speculative: dict[str, Any] | None = None  # SpeculativeFacts.to_dict(); None in records stored before it
    tokens: TokenTable | None = field(default=None, repr=False, compare=False)
    # tokenizer.ggml.token_type as little-endian int32s (TYPES_KEY), None when the file has no such int32
    # array. Kept beside ``tokens`` and out of to_dict() for the same reason: a registry stores the array apart,
    # once per content (whether a near-miss draft can be adapted depends on the types).
    token_types: bytes | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("tokens", None)
        d.pop("token_types", None)
        return d

    @classmethod
    def from_dict(
        cls, d: dict[str, Any], tokens: TokenTable | None = None, token_types: bytes | None = None
    ) -> ModelInfo:
        """Rebuild from ``to_dict()`` output (as a registry stores it) plus the stored token table and types."""
        d = refreshed(d)
        tok = d.pop("tokenizer", None)
        if tok is not None:
            tok = dict(tok)
            tok["special"] = {k: SpecialToken(**v) for k, v in tok.get("special", {}).items()}
            tok = TokenizerInfo(**tok)
        return cls(**d, tokenizer=tok, tokens=tokens, token_types=token_types)

    def token_texts(self, n: int) -> list[str]:
        if self.tokens is None:
            return []
        return [readable(self.tokens.text(i)) for i in range(min(n, self.tokens.count))]


def refreshed(d: dict[str, Any]) -> dict[str, Any]:
    """A stored ``to_dict()`` with what this build's rules derive from the architecture decided again: its kind and,
    for a file stored as "not usable as a draft model", its method. An inspection stored under older rules (which
    refused recurrent and hybrid drafts and called memory-less encoders transformers) then reads as this build
    decides, without reading the file again."""
    d = dict(d)
    arch = str(d.get("architecture") or "unknown")
    kind = llama_rules.arch_kind(arch)
    spec = d.get("speculative")
    if kind != d.get("arch_kind") or (isinstance(spec, dict) and spec.get("type") is None):
        d["arch_kind"] = kind
        tok = d.get("tokenizer")
        has_tokens = isinstance(tok, dict) and bool(tok.get("n_tokens"))
        # A stored method (a sidecar, MTP heads) came from the tensor names, which no rule here changed; only the
        # architecture's answer for an ordinary file is decided again, and that needs no tensor names.
        if not (isinstance(spec, dict) and spec.get("type")):
            fresh = speculative.detect(arch, kind, {}, set(), set(), has_tokens)
            d["speculative"], d["speculative_type"] = fresh.to_dict(), fresh.type
    return d


_SIZE_LABEL = re.compile(r"^\s*(?:(\d{1,4})\s*x\s*)?(\d{1,6}(?:\.\d{1,4})?)\s*([KMBT])\b", re.IGNORECASE)
_SIZE_UNIT = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def size_label_count(label: object) -> int:
    """The parameters a ``general.size_label`` claims, as convert_hf_to_gguf.py writes it from the original model
    ("0.5B" → 500,000,000; "8x7B" → 56,000,000,000; "30B-A3B" → 30,000,000,000), 0 for anything else. A claim of one
    string: for a header that lists no tensors, where nothing else says a size."""
    m = _SIZE_LABEL.match(label[:40]) if isinstance(label, str) else None
    if not m:
        return 0
    n = float(m.group(2)) * _SIZE_UNIT[m.group(3).upper()] * int(m.group(1) or 1)
    return int(n) if 0 < n <= 10**15 else 0


def load_refusal(info: dict[str, Any]) -> str | None:
    """Why llama.cpp cannot load the model an inspection describes (``to_dict()``, as a registry stores it), in a few
    words; None where the header gives no such reason.

    Only what no build of llama.cpp gets past: a file with no tensors (a header alone: loading stops at the first
    tensor it looks for, "tensor 'token_embd.weight' not found") or one that ends before its tensors' data does. A
    tokenizer the pinned build refuses is left out: another build may know it."""
    if info.get("n_tensors") == 0:
        return "it has no tensors, a header alone without the model's weights"
    if info.get("data_complete") is False:
        return "it ends before its tensor data does, a header alone or an unfinished download"
    return None


def token_text(table: TokenTable | None, token_id: int) -> str | None:
    """A token's text for display, or None when the id lies outside the table."""
    if table is None or not 0 <= token_id < table.count:
        return None
    return readable(table.text(token_id))


TYPES_KEY = "tokenizer.ggml.token_type"

SPECIAL_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "eot": "tokenizer.ggml.eot_token_id",
    "eom": "tokenizer.ggml.eom_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "sep": "tokenizer.ggml.seperator_token_id",
    "mask": "tokenizer.ggml.mask_token_id",
}


def _json_safe(v: Any) -> Any:
    if isinstance(v, ArrayRef):
        return v.describe()
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    return v


def _int_key(kv: dict[str, Any], key: str) -> int | None:
    v = kv.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bool_key(kv: dict[str, Any], key: str) -> bool | None:
    v = kv.get(key)
    return v if isinstance(v, bool) else None


def _str_key(kv: dict[str, Any], key: str) -> str | None:
    v = kv.get(key)
    return v if isinstance(v, str) else None


def _file_type(kv: dict[str, Any]) -> str | None:
    ft = _int_key(kv, "general.file_type")
    if ft is None:
        return None
    return LLAMA_FTYPE_NAMES.get(ft, f"unknown ({ft})")


def _tokenizer(h: Header) -> tuple[TokenizerInfo | None, TokenTable | None]:
    kv = h.kv
    model = _str_key(kv, "tokenizer.ggml.model")
    tokens = kv.get("tokenizer.ggml.tokens")
    table: TokenTable | None = None
    if isinstance(tokens, ArrayRef) and tokens.offsets is not None:
        table = TokenTable.from_header(h.buf, tokens.start, tokens.end, tokens.count, tokens.offsets, h.byteorder)
    elif isinstance(tokens, list) and all(isinstance(t, str) for t in tokens):
        # A tiny vocabulary was decoded as a list; rebuild the stored form.

        blob = b"".join(struct.pack("<Q", len(b)) + b for b in (t.encode() for t in tokens))
        table = TokenTable(blob, len(tokens))
    if model is None and table is None:
        return None, None
    n_tokens = table.count if table else 0
    if model in ("none", "no_vocab") and table is None:
        n_tokens = _int_key(kv, f"{kv.get('general.architecture')}.vocab_size") or 0
    eff = llama_rules.effective_tokenizer(
        model,
        _str_key(kv, "tokenizer.ggml.pre"),
        n_tokens,
        _bool_key(kv, "tokenizer.ggml.add_bos_token"),
        _bool_key(kv, "tokenizer.ggml.add_eos_token"),
        _int_key(kv, SPECIAL_KEYS["bos"]),
        _int_key(kv, SPECIAL_KEYS["eos"]),
        has_merges="tokenizer.ggml.merges" in kv,
    )
    if table is None and model not in ("none", "no_vocab"):
        eff = llama_rules.Effective(
            eff.vocab_type,
            eff.add_bos,
            eff.add_eos,
            eff.bos_id,
            eff.eos_id,
            eff.bos_defaulted,
            eff.eos_defaulted,
            "no tokenizer.ggml.tokens array: llama.cpp cannot load this vocabulary",
        )

    special = {
        name: SpecialToken(i, token_text(table, i))
        for name, key in SPECIAL_KEYS.items()
        if (i := _int_key(kv, key)) is not None
    }
    info = TokenizerInfo(
        model=model,
        pre=_str_key(kv, "tokenizer.ggml.pre"),
        n_tokens=n_tokens,
        vocab_type=eff.vocab_type,
        add_bos_stored=_bool_key(kv, "tokenizer.ggml.add_bos_token"),
        add_eos_stored=_bool_key(kv, "tokenizer.ggml.add_eos_token"),
        add_bos=eff.add_bos,
        add_eos=eff.add_eos,
        bos_id=eff.bos_id,
        eos_id=eff.eos_id,
        bos_defaulted=eff.bos_defaulted,
        eos_defaulted=eff.eos_defaulted,
        special=special,
        chat_template=_str_key(kv, "tokenizer.chat_template"),
        vocab_key=vocab_key(eff.vocab_type, table),
        table_sha256=table.sha256 if table else None,
        load_error=eff.load_error,
    )
    return info, table


def _token_types(h: Header) -> bytes | None:
    """The header's token types as little-endian int32s (llama.cpp reads them only as int32), else None."""
    v = h.kv.get(TYPES_KEY)
    if isinstance(v, ArrayRef) and v.type == GGUFValueType.INT32:
        raw = h.buf[v.start : v.start + 4 * v.count]
        if h.byteorder == "<":
            return bytes(raw)
        return struct.pack(f"<{v.count}i", *struct.unpack(f">{v.count}i", raw))
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        if all(-(2**31) <= x < 2**31 for x in v):  # a tiny vocabulary's array, decoded by the reader
            return struct.pack(f"<{len(v)}i", *v)
    return None


def info_from_headers(headers: list[Header]) -> ModelInfo:
    """Build the typed view; ``headers`` are the shards of a split file, first shard first."""
    h = headers[0]
    kv = h.kv
    arch = _str_key(kv, "general.architecture") or "unknown"
    tensors = [t for sh in headers for t in sh.tensors]
    tok, table = _tokenizer(h)
    kind = llama_rules.arch_kind(arch)
    spec = speculative.detect(arch, kind, kv, {t.name for t in tensors}, {t.name for t in h.tensors}, table is not None)
    return ModelInfo(
        source=h.source,
        gguf_version=h.version,
        byteorder="little" if h.byteorder == "<" else "big",
        architecture=arch,
        arch_kind=kind,
        name=_str_key(kv, "general.name"),
        basename=_str_key(kv, "general.basename"),
        size_label=_str_key(kv, "general.size_label"),
        file_type=_file_type(kv),
        # Each tensor's count fits in int64 (the reader refuses more), but their sum need not when the
        # data lies past the file's end (data_complete false): saturate rather than overflow a BIGINT.
        parameter_count=min(sum(t.n_elements for t in tensors), INT64_MAX),
        context_length=_int_key(kv, f"{arch}.context_length"),
        block_count=_int_key(kv, f"{arch}.block_count"),
        expert_count=_int_key(kv, f"{arch}.expert_count"),
        expert_used_count=_int_key(kv, f"{arch}.expert_used_count"),
        n_tensors=len(tensors),
        split_count=len(headers),
        header_size=h.header_size,
        data_offset=h.data_offset,
        file_size=(
            min(sum(sh.file_size or 0 for sh in headers), INT64_MAX) if all(sh.file_size for sh in headers) else None
        ),
        bytes_fetched=sum(sh.bytes_fetched for sh in headers),
        tokenizer=tok,
        tensor_types=dict(Counter(_ggml_type_name(t.type) for t in tensors)),
        metadata={k: _json_safe(v) for k, v in kv.items()},
        data_complete=_all_complete([sh.data_complete for sh in headers]),
        speculative_type=spec.type,
        speculative=spec.to_dict(),
        tokens=table,
        token_types=_token_types(h),
    )


def _all_complete(flags: list[bool | None]) -> bool | None:
    """False when any shard is cut short, else None when any size is unknown, else True."""
    if False in flags:
        return False
    return None if None in flags else True


def _ggml_type_name(t: int) -> str:
    return GGML_TYPE_NAMES.get(t, f"type{t}")


@contextmanager
def shared_deadline(*specs: object) -> Iterator[Deadline | None]:
    """One deadline for every remote read of one request or job (both files of a check, every shard):
    SPECREG_HEADER_DEADLINE_SECONDS in all, not per file. Closed at the end, its connections with it.
    None when no spec is remote, or when the setting is bad (each read then says so in one line)."""
    deadline = None
    if any(isinstance(s, str) and is_remote(s) for s in specs):
        from .deadlines import Deadline  # imported here: reading a local file must not load huggingface_hub

        try:
            deadline = Deadline()
        except SourceError:
            pass
    try:
        yield deadline
    finally:
        if deadline is not None:
            deadline.close()


def inspect_source(
    spec: str | os.PathLike[str] | BinaryIO, max_header_bytes: int | None = None, *, deadline: Deadline | None = None
) -> ModelInfo:
    """Inspect a path, file object, URL or hf:// source; split files are followed to every shard.

    ``deadline``: the request's or job's (``shared_deadline``); without one, a remote source gets its own.
    """
    cap = max_header_bytes or DEFAULT_MAX_HEADER
    name = spec if isinstance(spec, str) else getattr(spec, "name", "<file object>")
    try:
        shards: list[str | os.PathLike[str] | BinaryIO] = [spec]
        if isinstance(spec, (str, os.PathLike)):
            shards = list(shard_names(os.fspath(spec)))
        # One deadline for every shard: SPECREG_HEADER_DEADLINE_SECONDS bounds the whole inspection
        # (a web check waits for it), not each of up to MAX_SHARDS reads.
        with shared_deadline(spec if deadline is None else None) as own:
            headers = []
            for shard in shards:
                src = open_source(shard, deadline=deadline or own)
                try:
                    headers.append(read_header(src, cap))
                finally:
                    src.close()
        return info_from_headers(headers)
    except (GGUFError, SourceError) as exc:
        msg = str(exc)
        shown = os.fspath(name) if not isinstance(name, str) else name
        kind = InspectTimeout if isinstance(exc, DeadlineExceeded) else InspectError
        raise kind(msg if msg.startswith(str(shown)) else f"{shown}: {msg}") from None
