"""Adapt a near-miss draft to a target: a copy of DRAFT whose tokenizer metadata agrees with TARGET where llama.cpp
compares them, its tensor data byte for byte the draft's.

A near-miss draft shares the target's vocabulary but for a few special tokens (DeepSeek-R1-Distill-Qwen against a
Qwen2.5 draft: 7 texts in the added-token range, and the target adds a BOS). The draft sees token ids, never texts,
and the target verifies every drafted token, so giving the draft the target's special tokens (texts, types, BOS/EOS
ids and flags) changes what llama.cpp accepts, not what the target outputs. ``plan`` decides from the two headers
alone whether that is safe, and refuses with the rule that blocks it otherwise; ``adapt`` writes the copy.

What it changes, and only when safe (``plan``):

- the token texts that differ in llama.cpp's compared range, each at an id whose type is CONTROL, USER_DEFINED,
  UNUSED or UNKNOWN in either file (or a padding token), at most ``max_changed`` of them: text and type become the
  target's;
- add_bos / add_eos and the BOS / EOS ids become the target's effective ones (which must be ids the draft has);
- the other special ids (EOT, EOM, padding, unknown, separator, mask) become the target's stored ones;
- ``tokenizer.ggml.suppress_tokens`` becomes the target's (see ``SUPPRESS_CHOICE``).

It never changes the token count (the embedding and output tensors fix it) and refuses a draft with more tokens
than the target (a drafted id past the target's vocabulary fails the target's decode), another vocabulary type, other
ordinary texts, a diffusion or memory-less model (the architecture rule) and speculation sidecars.

The file is written by hand, streamed: the header is the draft's, key-value pair by key-value pair as stored, with
the changed pairs re-encoded and ``specreg.adapted.*`` pairs appended; the tensor infos and the tensor data are
copied as stored, in chunks, hashing each tensor on the way. Not gguf-py's GGUFReader / GGUFWriter, because:
GGUFReader maps the whole file and builds a numpy object per array element (seconds for a real vocabulary's tokens
and merges) and cannot open a header-only TARGET; GGUFWriter re-encodes every value from Python
objects (it needs each array's element type, refuses empty arrays, rewrites strings through ``str`` and always
writes version 3), where copying the unchanged pairs' bytes keeps them identical by construction. General.alignment
is carried as stored, and the tensor offsets with it (they are relative to the data section). The result is then
read back: each tensor's name, type, shape, offset and order, its bytes' sha256, every unchanged key's bytes, and
``check_pair`` against the target. It is written to a temporary file beside the output and renamed only then.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .compat import PairCheck, article, check_pair
from .ggml_constants import GGML_TYPE_NAMES, GGUF_DEFAULT_ALIGNMENT, GGUFValueType
from .ggml_types import TYPE_TRAITS
from .gguf_header import SCALAR_SIZES, ArrayRef, GGUFError, Header, TensorInfo, read_header
from .info import DEFAULT_MAX_HEADER, SPECIAL_KEYS, ModelInfo, info_from_headers, shared_deadline
from .llama_rules import LLAMA_CPP_BUILD
from .sources import FileSource, Source, SourceError, is_remote, open_source
from .tokens import CHECK_START_ID, TokenTable, quoted, readable

if TYPE_CHECKING:
    from hashlib import _Hash

T = GGUFValueType

# enum llama_token_type (include/llama.h of the pinned build).
TOKEN_TYPE_NAMES = {
    0: "UNDEFINED",
    1: "NORMAL",
    2: "UNKNOWN",
    3: "CONTROL",
    4: "USER_DEFINED",
    5: "UNUSED",
    6: "BYTE",
}
# The types at which a differing text may be adapted: tokens outside the learned text vocabulary.
SPECIAL_TYPES = frozenset({2, 3, 4, 5})
DEFAULT_MAX_CHANGED = 256
COPY_CHUNK = 8 << 20  # bytes per read while copying tensor data: memory stays at this, whatever the file
# What adapt_draft itself takes of two claims a header makes about work it causes (llama.cpp accepts any power-of-two
# alignment that fits 32 bits; real files say 32): padding is written in chunks, but a 2^30 alignment would still
# write a gigabyte of zeros per gap; a suppress_tokens list longer than any vocabulary is not a list of token ids.
DEFAULT_MAX_ALIGNMENT = 1 << 20
DEFAULT_MAX_SUPPRESS = 1 << 20

TOKENS_KEY = "tokenizer.ggml.tokens"
TYPES_KEY = "tokenizer.ggml.token_type"
SUPPRESS_KEY = "tokenizer.ggml.suppress_tokens"
ADD_KEYS = {"bos": "tokenizer.ggml.add_bos_token", "eos": "tokenizer.ggml.add_eos_token"}
OTHER_SPECIALS = ("eot", "eom", "pad", "unk", "sep", "mask")
PREFIX = "specreg.adapted."
FORMAT_VERSION = 1

# Which ids each model suppresses, recorded in each file as specreg.adapted.suppress_tokens. llama.cpp turns a model's
# suppress_tokens into -inf logit biases of that model's sampler (common/sampling.cpp), so the draft's list decides
# which ids it can never propose, and the target's which ids it never samples.
SUPPRESS_CHOICE = (
    "target: the draft suppresses exactly the ids the target suppresses (a token the target never samples is "
    "never worth drafting, and one the target may sample must stay draftable)"
)

HEX_PLACEHOLDER = b"0" * 64  # a sha256 in hex, filled in once the data has been copied


class AdaptError(Exception):
    """A failure (bad path, malformed GGUF, unreadable or partial draft, no room): one line, exit status 2."""


class NotAdaptable(Exception):
    """The pair cannot be adapted safely: ``rule`` names the rule that blocks it (exit status 1)."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"not adaptable ({rule}): {detail}")
        self.rule = rule
        self.detail = detail


class TokenTypes:
    """A ``tokenizer.ggml.token_type`` array (int32 per token), read in place from the bytes that hold it."""

    def __init__(self, buf: bytes, start: int, count: int, byteorder: str = "<") -> None:
        if start + 4 * count > len(buf):
            raise ValueError(f"token type array of {count} entries does not fit in {len(buf)} bytes")
        self.buf = buf
        self.start = start
        self.count = count
        self.byteorder = byteorder
        self._unpack = struct.Struct(byteorder + "i").unpack_from

    @classmethod
    def from_values(cls, values: Sequence[int]) -> TokenTypes:
        return cls(struct.pack(f"<{len(values)}i", *values), 0, len(values))

    @classmethod
    def from_header(cls, h: Header) -> TokenTypes | None:
        """The header's array when llama.cpp can read it (int32 elements); None otherwise."""
        v = h.kv.get(TYPES_KEY)
        if isinstance(v, ArrayRef) and v.type == T.INT32:
            return cls(h.buf, v.start, v.count, h.byteorder)
        if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            if all(-(2**31) <= x < 2**31 for x in v):  # a tiny vocabulary's array, decoded by the reader
                return cls.from_values(v)
        return None

    def get(self, i: int) -> int | None:
        if not 0 <= i < self.count:
            return None
        return int(self._unpack(self.buf, self.start + 4 * i)[0])


def type_name(t: int | None) -> str:
    return "absent" if t is None else TOKEN_TYPE_NAMES.get(t, f"type {t}")


@dataclass
class Side:
    """What ``plan`` needs of one file: its typed view, its token types and its suppressed tokens."""

    info: ModelInfo
    types: TokenTypes | None
    suppress: list[int] | None  # tokenizer.ggml.suppress_tokens as stored; None when absent

    @classmethod
    def from_header(cls, h: Header, info: ModelInfo | None = None) -> Side:
        return cls(info or info_from_headers([h]), TokenTypes.from_header(h), _int_array(h, SUPPRESS_KEY))

    @classmethod
    def from_info(cls, info: ModelInfo) -> Side:
        """The same from a ModelInfo alone (a registry's stored one, rebuilt with its token table and types), so a
        registry decides with ``plan`` itself, never with rules of its own.

        The suppressed ids come from the stored metadata, which keeps an array only up to the reader's
        SMALL_ARRAY elements (a longer one is a description): they change only the planned keys, never whether
        the pair is adaptable, so such a list reads as none."""
        types = info.token_types
        tt = TokenTypes(types, 0, len(types) // 4) if types is not None else None
        v = info.metadata.get(SUPPRESS_KEY)
        suppress = [x for x in v if isinstance(x, int) and not isinstance(x, bool)] if isinstance(v, list) else None
        return cls(info, tt, suppress)


def _int_array(h: Header, key: str) -> list[int] | None:
    v = h.kv.get(key)
    count = len(v) if isinstance(v, list) else v.count if isinstance(v, ArrayRef) else 0
    if count > DEFAULT_MAX_SUPPRESS:
        raise AdaptError(f"{key} holds {count:,} ids, more than the {DEFAULT_MAX_SUPPRESS:,} adapt_draft reads")
    if isinstance(v, list):
        return [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
    if isinstance(v, ArrayRef) and v.type in (T.INT32, T.UINT32, T.INT64, T.UINT64):
        fmt = {T.INT32: "i", T.UINT32: "I", T.INT64: "q", T.UINT64: "Q"}[T(v.type)]
        return list(struct.unpack_from(f"{h.byteorder}{v.count}{fmt}", h.buf, v.start))
    return None


@dataclass
class TokenChange:
    id: int
    draft_text: bytes
    text: bytes  # the target's, which the adapted draft takes
    draft_type: int | None
    type: int | None  # the target's (None: the target stores no types, so the draft's stays)


@dataclass
class KeyChange:
    key: str
    before: Any  # the draft's stored value; None when absent
    after: Any  # the value written; None when the key is removed

    def describe(self) -> str:
        return f"{self.key}: {_shown(self.before)} -> {_shown(self.after)}"


def _shown(v: Any) -> str:
    if v is None:
        return "(absent)"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v[:8]) + (", …" if len(v) > 8 else "") + f"] ({len(v)} ids)"
    return str(v)


@dataclass
class Plan:
    """What adapting the draft to the target changes; ``fixes`` are the llama.cpp rules that fail before it."""

    tokens: list[TokenChange]
    keys: list[KeyChange]
    fixes: list[str]
    suppress_choice: str = SUPPRESS_CHOICE

    @property
    def changed_ids(self) -> list[int]:
        return [c.id for c in self.tokens]

    def summary(self) -> str:
        """In a few words, for a table row: "7 special tokens, BOS"."""
        parts = []
        if self.tokens:
            n = len(self.tokens)
            parts.append(f"{n} special token{'s' if n != 1 else ''}")
        parts += [rule.upper() for rule in ("bos", "eos") if rule in self.fixes]
        return ", ".join(parts) or "special token ids"

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "fixes": self.fixes,
            "changed_ids": self.changed_ids,
            "tokens": [
                {
                    "id": c.id,
                    "draft_text": readable(c.draft_text),
                    "text": readable(c.text),
                    "draft_type": type_name(c.draft_type),
                    "type": type_name(c.type if c.type is not None else c.draft_type),
                }
                for c in self.tokens
            ],
            "keys": [{"key": k.key, "before": k.before, "after": k.after} for k in self.keys],
            "suppress_tokens": self.suppress_choice,
        }


# --- deciding: the rules, from the two headers alone (a registry can call this without the draft's data) ---


def plan(target: Side, draft: Side, max_changed: int = DEFAULT_MAX_CHANGED) -> Plan:
    """What adapting ``draft`` to ``target`` would change; raises NotAdaptable naming the rule that forbids it."""
    t, d = target.info, draft.info
    method = (d.speculative or {}).get("type") or "draft-simple"
    if method != "draft-simple":
        raise NotAdaptable(
            "method",
            f"The draft is for {method}, not an ordinary draft model: only a draft-simple model's vocabulary is "
            "compared, so there is nothing to adapt.",
        )
    before = check_pair(t, d)
    checks = {c.rule: c for c in before.checks}
    for rule in ("architecture", "vocab_type"):
        c = checks[rule]
        if c.ok is not True:
            raise NotAdaptable(rule, c.detail)
    tt, dt = t.tokenizer, d.tokenizer
    if tt is None or dt is None:  # vocab_type passed, so both exist; this keeps mypy and a future rule honest
        raise NotAdaptable("vocab_type", "A file has no tokenizer metadata.")
    for role, tok in (("target", tt), ("draft", dt)):
        if tok.load_error:
            raise NotAdaptable(
                "tokenizer", f"llama.cpp {LLAMA_CPP_BUILD} cannot load the {role}'s tokenizer: {tok.load_error}."
            )
    size = checks["vocab_size"]
    if size.ok is not True:
        raise NotAdaptable(
            "vocab_size",
            f"{size.detail} The token count cannot change: the draft's embedding and output tensors fix it.",
        )
    if dt.n_tokens > tt.n_tokens:
        raise NotAdaptable(
            "vocab_size",
            f"The draft has {dt.n_tokens:,} tokens, more than the target's {tt.n_tokens:,}: a drafted id past the "
            "target's vocabulary would fail the target's decode.",
        )
    if before.compatible:
        raise NotAdaptable("compatible", "The draft is already compatible with the target: there is nothing to adapt.")
    tokens = _token_changes(target, draft, max_changed)
    keys = _special_changes(t, d, dt.n_tokens) + _suppress_changes(target, draft, dt.n_tokens)
    fixes = [c.rule for c in before.checks if c.ok is not True]
    return Plan(tokens, keys, fixes)


def differing_ids(a: TokenTable, b: TokenTable, limit: int) -> list[int]:
    """Ids in llama.cpp's compared range [5, min(n)) whose texts differ as it compares them, at most ``limit``.

    Runs of ids whose stored bytes are equal are skipped in one comparison; only a run that differs is compared
    text by text, so the time follows the number of differing runs (bounded by ``limit``), not the vocabulary."""
    n = min(a.count, b.count)
    step = 1024
    same_order = a.byteorder == b.byteorder
    out: list[int] = []
    lo = CHECK_START_ID
    while lo < n and len(out) < limit:
        hi = min(lo + step, n)
        if not (same_order and a.region(lo, hi) == b.region(lo, hi)):
            for i in range(lo, hi):
                if a.llama_text(i) != b.llama_text(i):
                    out.append(i)
                    if len(out) >= limit:
                        break
        lo = hi
    return out


def _token_changes(target: Side, draft: Side, max_changed: int) -> list[TokenChange]:
    ta, da = target.info.tokens, draft.info.tokens
    if ta is None or da is None:  # both "none" vocabularies (vocab_size would have refused one missing table)
        return []
    ids = differing_ids(ta, da, max_changed + 1)
    pads = {
        s.id
        for info in (target.info, draft.info)
        if info.tokenizer and (s := info.tokenizer.special.get("pad")) is not None
    }
    changes = []
    for i in ids:
        t_type = target.types.get(i) if target.types else None
        d_type = draft.types.get(i) if draft.types else None
        if t_type not in SPECIAL_TYPES and d_type not in SPECIAL_TYPES and i not in pads:
            raise NotAdaptable(
                "token_text",
                f"Token {i:,} differs (target {quoted(ta.llama_text(i))}, draft {quoted(da.llama_text(i))}) and is "
                f"an ordinary token (target {type_name(t_type)}, draft {type_name(d_type)}): the vocabularies differ "
                "in their base texts, so a drafted id would mean other text to the target.",
            )
        changes.append(TokenChange(i, da.text(i), ta.text(i), d_type, t_type))
    if len(ids) > max_changed:
        raise NotAdaptable(
            "token_text",
            f"More than {max_changed} token texts differ (the first at id {ids[0]:,}); at most {max_changed} are "
            "adapted (--max-changed).",
        )
    return changes


def _stored_id(info: ModelInfo, name: str) -> int | None:
    s = info.tokenizer.special.get(name) if info.tokenizer else None
    return s.id if s is not None else None


def _special_changes(t: ModelInfo, d: ModelInfo, n_draft: int) -> list[KeyChange]:
    tt, dt = t.tokenizer, d.tokenizer
    if tt is None or dt is None:
        return []
    keys: list[KeyChange] = []
    for rule in ("bos", "eos"):
        name = rule.upper()
        add_t, add_d = (tt.add_bos, dt.add_bos) if rule == "bos" else (tt.add_eos, dt.add_eos)
        id_t, id_d = (tt.bos_id, dt.bos_id) if rule == "bos" else (tt.eos_id, dt.eos_id)
        if id_t >= n_draft:
            raise NotAdaptable(
                rule,
                f"The target's {name} is token {id_t:,}, which the draft's vocabulary of {n_draft:,} tokens lacks.",
            )
        if id_t < 0 and add_t:
            raise NotAdaptable(
                rule, f"The target adds {article(name)} {name} token but has no {name} id to give the draft."
            )
        if add_t != add_d:
            stored = dt.add_bos_stored if rule == "bos" else dt.add_eos_stored
            keys.append(KeyChange(ADD_KEYS[rule], stored, add_t))
        if id_t >= 0 and id_t != id_d:
            keys.append(KeyChange(SPECIAL_KEYS[rule], _stored_id(d, rule), id_t))
    for name in OTHER_SPECIALS:
        stored_t, stored_d = _stored_id(t, name), _stored_id(d, name)
        new = stored_t if stored_t is not None and 0 <= stored_t < n_draft else None
        if new != stored_d:
            keys.append(KeyChange(SPECIAL_KEYS[name], stored_d, new))
    return keys


def _suppress_changes(target: Side, draft: Side, n_draft: int) -> list[KeyChange]:
    """The target's suppressed ids (those the draft has), or no key when the target suppresses none."""
    new = [i for i in target.suppress or [] if 0 <= i < n_draft] or None
    if new == draft.suppress:
        return []
    return [KeyChange(SUPPRESS_KEY, draft.suppress, new)]


# --- writing ---


@dataclass
class Result:
    output: str
    target: str
    draft: str
    plan: Plan
    draft_sha256: str
    target_sha256: str | None  # the whole TARGET file's; None when it is remote or only a header
    target_header_sha256: str
    tensors: int
    tensors_sha256: str  # over every tensor's (name, type, shape, sha256 of its bytes), in order: the draft's too
    alignment: int
    bytes_written: int
    check: PairCheck = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "adapted": True,
            "output": self.output,
            "target": self.target,
            "draft": self.draft,
            **self.plan.to_dict(),
            "draft_sha256": self.draft_sha256,
            "target_sha256": self.target_sha256,
            "target_header_sha256": self.target_header_sha256,
            "tensors": self.tensors,
            "tensors_sha256": self.tensors_sha256,
            "tensor_data": "unchanged",
            "alignment": self.alignment,
            "bytes_written": self.bytes_written,
            "check_pair": self.check.verdict,
        }


def adapt(
    target: str,
    draft: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    max_changed: int = DEFAULT_MAX_CHANGED,
    force: bool = False,
    max_header_bytes: int | None = None,
    max_alignment: int = DEFAULT_MAX_ALIGNMENT,
) -> Result:
    """Write DRAFT adapted to TARGET at ``output``. Raises NotAdaptable (nothing written) or AdaptError."""
    cap = max_header_bytes or DEFAULT_MAX_HEADER
    draft_name = os.fspath(draft)
    if is_remote(draft_name):
        raise AdaptError(f"{draft_name}: DRAFT must be a local file (its tensor data is copied; download it first)")
    if max_changed < 0:
        raise AdaptError("--max-changed must be 0 or more")
    out = Path(output)
    _check_output_folder(out, force)
    t_header = _read_target(target, cap)
    try:
        src = FileSource.open(draft_name)
    except SourceError as exc:
        raise AdaptError(str(exc)) from None
    with src:
        d_header = _read(src, cap)
        t_info, d_info = info_from_headers([t_header]), info_from_headers([d_header])
        the_plan = plan(Side.from_header(t_header, t_info), Side.from_header(d_header, d_info), max_changed)
        _check_whole(d_header, d_info)
        _check_not_an_input(out, [draft_name] + ([] if is_remote(target) else [target]))
        target_sha = _whole_file_sha256(target) if not is_remote(target) and t_header.data_complete else None
        provenance = _provenance(target, draft_name, t_header, target_sha, the_plan)
        header, fixups, changed = _new_header(d_header, the_plan, provenance)
        alignment = _alignment(d_header, max_alignment)
        adapted = _header_info(header, alignment, str(out))
        after = check_pair(t_info, adapted)
        if not after.compatible:  # a rule the plan did not foresee (llama.cpp forcing a flag, say): refuse
            failed = next(c for c in after.checks if c.ok is not True)
            raise NotAdaptable(failed.rule, f"after adaptation: {failed.detail}")
        data_bytes = d_header.data_end - d_header.data_offset
        _check_room(out, len(header) + data_bytes + 2 * alignment)
        written = _write(out, src, d_header, header, fixups, alignment, t_info, changed)
    return Result(
        output=str(out),
        target=target,
        draft=draft_name,
        plan=the_plan,
        draft_sha256=written.draft_sha256,
        target_sha256=target_sha,
        target_header_sha256=provenance_value(provenance, "target_header_sha256"),
        tensors=len(d_header.tensors),
        tensors_sha256=written.tensors_sha256,
        alignment=alignment,
        bytes_written=written.size,
        check=written.check,
    )


def _read(src: Source, cap: int) -> Header:
    try:
        return read_header(src, cap)
    except (GGUFError, SourceError) as exc:
        msg = str(exc)
        raise AdaptError(msg if msg.startswith(src.name) else f"{src.name}: {msg}") from None


def _read_target(spec: str, cap: int) -> Header:
    """TARGET's header (its first shard's, where the tokenizer lives): a local path or an hf:// source; only the
    header is read, so a first part of a big file will do."""
    try:
        with shared_deadline(spec) as deadline:
            src = open_source(spec, deadline=deadline)
            try:
                return _read(src, cap)
            finally:
                src.close()
    except SourceError as exc:
        msg = str(exc)
        raise AdaptError(msg if msg.startswith(spec) else f"{spec}: {msg}") from None


def _check_output_folder(out: Path, force: bool) -> None:
    folder = out.parent
    if not folder.is_dir():
        raise AdaptError(f"{out}: the folder {folder} does not exist")
    if out.is_dir():
        raise AdaptError(f"{out}: is a directory")
    if out.exists() and not force:
        raise AdaptError(f"{out}: exists already (--force replaces it)")


def _check_not_an_input(out: Path, inputs: list[str]) -> None:
    for path in inputs:
        try:
            if out.exists() and os.path.samefile(out, path):
                raise AdaptError(f"{out}: is an input of the adaptation; write the adapted draft elsewhere")
        except OSError:
            continue


def _check_whole(h: Header, info: ModelInfo) -> None:
    split = h.kv.get("split.count")
    if isinstance(split, int) and not isinstance(split, bool) and split > 1:
        raise AdaptError(
            f"{h.source}: is one of {split} shards; merge the draft into one file first (llama-gguf-split --merge)"
        )
    if h.data_complete is not True:
        raise AdaptError(
            f"{h.source}: ends before its tensor data does (an unfinished download?); DRAFT must be a whole file"
        )
    if info.n_tensors == 0:
        raise AdaptError(f"{h.source}: has no tensors; DRAFT must be a model")


def _check_room(out: Path, need: int) -> None:
    try:
        free = shutil.disk_usage(out.parent).free
    except OSError:
        return
    if free < need:
        raise AdaptError(f"{out.parent}: {free:,} bytes free, the adapted draft needs {need:,}")


def _alignment(h: Header, limit: int = DEFAULT_MAX_ALIGNMENT) -> int:
    v = h.kv.get("general.alignment")
    n = v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else GGUF_DEFAULT_ALIGNMENT
    if n > limit:
        raise AdaptError(f"general.alignment {n:,} is past the {limit:,} bytes adapt_draft pads to (--max-alignment)")
    return n


def _pad(f: BinaryIO, n: int) -> None:
    """``n`` zero bytes, written a chunk at a time: memory stays at COPY_CHUNK whatever the alignment."""
    zeros = b"\0" * min(n, COPY_CHUNK)
    while n > 0:
        f.write(zeros[: min(n, len(zeros))])
        n -= len(zeros)


def _whole_file_sha256(path: str) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(COPY_CHUNK):
                h.update(chunk)
    except OSError as exc:
        raise AdaptError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return h.hexdigest()


# --- the header: the draft's pairs as stored, the changed ones re-encoded, the provenance appended ---


def _kv_spans(h: Header) -> tuple[list[tuple[str, int, int]], int]:
    """Each key-value pair's byte range in ``h.buf``, in file order, and where the tensor infos start.

    The header has been read and checked by ``read_header``; this walks it again by its length prefixes only."""
    buf, bo = h.buf, h.byteorder
    u64, i32 = struct.Struct(bo + "Q"), struct.Struct(bo + "i")
    pos = 4 + 4 + 8 + 8  # magic, version, tensor count, key-value count
    spans = []
    try:
        for key, value in h.kv.items():
            start = pos
            pos += 8 + u64.unpack_from(buf, pos)[0]
            vtype = i32.unpack_from(buf, pos)[0]
            pos += 4
            if vtype == T.STRING:
                pos += 8 + u64.unpack_from(buf, pos)[0]
            elif vtype == T.ARRAY:
                etype = i32.unpack_from(buf, pos)[0]
                count = u64.unpack_from(buf, pos + 4)[0]
                pos += 12
                if etype != T.STRING:
                    pos += count * SCALAR_SIZES[etype]
                elif isinstance(value, ArrayRef):
                    pos = value.end
                else:
                    for _ in range(count):
                        pos += 8 + u64.unpack_from(buf, pos)[0]
            else:
                pos += SCALAR_SIZES[vtype]
            spans.append((key, start, pos))
    except (struct.error, KeyError) as exc:  # only if the header changed under us: read_header checked it
        raise AdaptError(f"{h.source}: cannot walk its metadata again ({exc})") from None
    if pos > h.header_size:
        raise AdaptError(f"{h.source}: its metadata runs past its header")
    return spans, pos


def _pair(bo: str, key: str, vtype: int, payload: bytes) -> bytes:
    k = key.encode()
    return struct.pack(f"{bo}Q", len(k)) + k + struct.pack(f"{bo}i", vtype) + payload


def _string(bo: str, s: bytes) -> bytes:
    return struct.pack(f"{bo}Q", len(s)) + s


def _string_array(bo: str, items: Sequence[bytes]) -> bytes:
    return struct.pack(f"{bo}iQ", T.STRING, len(items)) + b"".join(_string(bo, s) for s in items)


def _int32_array(bo: str, values: Sequence[int]) -> bytes:
    return struct.pack(f"{bo}iQ", T.INT32, len(values)) + struct.pack(f"{bo}{len(values)}i", *values)


def _key_value(bo: str, change: KeyChange) -> tuple[int, bytes]:
    v = change.after
    if isinstance(v, bool):
        return T.BOOL, struct.pack("?", v)
    if isinstance(v, int):
        return T.UINT32, struct.pack(f"{bo}I", v)
    if isinstance(v, list):
        return T.ARRAY, _int32_array(bo, v)
    raise TypeError(f"no encoding for {change.key} = {v!r}")


def _stored_table(h: Header, span: tuple[int, int]) -> TokenTable:
    """The token array exactly as the pair at ``span`` stores it (in the file's byte order, however short)."""
    start, end = span
    bo = h.byteorder
    klen = struct.unpack_from(f"{bo}Q", h.buf, start)[0]
    payload = start + 8 + klen + 4  # past the key and the value type: the element type, the count, the elements
    count = struct.unpack_from(f"{bo}Q", h.buf, payload + 4)[0]
    try:
        return TokenTable(h.buf, count, bo, start=payload + 12, end=end)
    except ValueError as exc:
        raise AdaptError(f"{h.source}: its token table cannot be walked again ({exc})") from None


def _tokens_payload(bo: str, table: TokenTable, changes: list[TokenChange]) -> bytes:
    """The draft's token array with the changed texts: the runs between them copied as stored."""
    parts = [struct.pack(f"{bo}iQ", T.STRING, table.count)]
    prev = 0
    for c in changes:
        parts.append(table.region(prev, c.id))
        parts.append(_string(bo, c.text))
        prev = c.id + 1
    parts.append(table.region(prev, table.count))
    return b"".join(parts)


def _types_payload(h: Header, types: TokenTypes, changes: list[TokenChange]) -> bytes:
    bo = h.byteorder
    if types.buf is h.buf and types.byteorder == bo:
        arr = bytearray(h.buf[types.start : types.start + 4 * types.count])
    else:
        arr = bytearray(struct.pack(f"{bo}{types.count}i", *[types.get(i) or 0 for i in range(types.count)]))
    for c in changes:
        if c.type is not None and c.id < types.count:
            struct.pack_into(f"{bo}i", arr, 4 * c.id, c.type)
    return struct.pack(f"{bo}iQ", T.INT32, types.count) + bytes(arr)


@dataclass
class Provenance:
    """One specreg.adapted.* pair to write: its value type and payload; ``fill`` marks a sha256 known only later."""

    name: str
    vtype: int
    value: Any
    fill: bool = False


def provenance_value(items: list[Provenance], name: str) -> str:
    return str(next(p.value for p in items if p.name == name))


def _source_label(spec: str) -> str:
    """How the file is named in the metadata: an hf:// source as given, a local path by its file name only."""
    return spec if is_remote(spec) else Path(spec).name


def _provenance(target: str, draft: str, t_header: Header, target_sha: str | None, p: Plan) -> list[Provenance]:
    items = [
        Provenance("version", T.UINT32, FORMAT_VERSION),
        Provenance("tool", T.STRING, f"specreg adapt_draft (rules of llama.cpp {LLAMA_CPP_BUILD})"),
        Provenance("target", T.STRING, _source_label(target)),
        Provenance("draft", T.STRING, _source_label(draft)),
        Provenance("target_header_sha256", T.STRING, hashlib.sha256(t_header.buf).hexdigest()),
    ]
    if target_sha:
        items.append(Provenance("target_sha256", T.STRING, target_sha))
    items += [
        Provenance("draft_sha256", T.STRING, HEX_PLACEHOLDER.decode(), fill=True),
        Provenance("tensors_sha256", T.STRING, HEX_PLACEHOLDER.decode(), fill=True),
        Provenance("fixes", T.STRING, ", ".join(p.fixes)),
        Provenance("changed_count", T.UINT32, len(p.tokens)),
    ]
    if p.tokens:  # GGUF arrays here are never empty: gguf-py's writer refuses empty ones
        items += [
            Provenance("changed_ids", T.INT32, [c.id for c in p.tokens]),
            Provenance("texts_from", T.STRING, [c.draft_text for c in p.tokens]),
            Provenance("types_from", T.INT32, [-1 if c.draft_type is None else c.draft_type for c in p.tokens]),
        ]
    if p.keys:
        items.append(Provenance("changes", T.STRING, [k.describe().encode() for k in p.keys]))
    items.append(Provenance("suppress_tokens", T.STRING, p.suppress_choice))
    return items


def _new_header(h: Header, p: Plan, provenance: list[Provenance]) -> tuple[bytes, dict[str, int], set[str]]:
    """The adapted draft's header (up to the end of its tensor infos), where each placeholder's hex digits are, and
    the draft's keys it changes or removes (every other pair is copied as stored)."""
    bo = h.byteorder
    spans, infos_start = _kv_spans(h)
    replace: dict[str, tuple[int, bytes] | None] = {}
    if p.tokens:
        span = next(((s, e) for key, s, e in spans if key == TOKENS_KEY), None)
        if span is None or h.kv_types[TOKENS_KEY] != T.ARRAY:
            raise AdaptError(f"{h.source}: has no token array to adapt")
        replace[TOKENS_KEY] = (T.ARRAY, _tokens_payload(bo, _stored_table(h, span), p.tokens))
        types = TokenTypes.from_header(h)
        if types is not None and any(c.type is not None for c in p.tokens):
            replace[TYPES_KEY] = (T.ARRAY, _types_payload(h, types, p.tokens))
    for k in p.keys:
        replace[k.key] = None if k.after is None else _key_value(bo, k)
    for key in h.kv:
        if key.startswith(PREFIX):  # an adapted file adapted again: its old provenance goes
            replace[key] = None
    changed = set(replace)
    pairs: list[bytes] = []
    for key, start, end in spans:
        if key not in replace:
            pairs.append(h.buf[start:end])
        elif (new := replace.pop(key)) is not None:
            pairs.append(_pair(bo, key, *new))
    pairs += [_pair(bo, key, *new) for key, new in replace.items() if new is not None]
    out = bytearray(h.buf[:16])  # magic, version and tensor count as stored
    fixups: dict[str, int] = {}
    body = bytearray(b"".join(pairs))
    for item in provenance:
        key = PREFIX + item.name
        if item.vtype == T.STRING and isinstance(item.value, list):
            pair = _pair(bo, key, T.ARRAY, _string_array(bo, item.value))
        elif item.vtype == T.STRING:
            pair = _pair(bo, key, T.STRING, _string(bo, str(item.value).encode()))
        elif item.vtype == T.INT32:
            pair = _pair(bo, key, T.ARRAY, _int32_array(bo, item.value))
        else:
            pair = _pair(bo, key, T.UINT32, struct.pack(f"{bo}I", item.value))
        if item.fill:
            fixups[item.name] = 24 + len(body) + len(pair) - len(HEX_PLACEHOLDER)
        body += pair
        pairs.append(pair)
    out += struct.pack(f"{bo}q", len(pairs))
    out += body
    out += h.buf[infos_start : h.header_size]
    return bytes(out), fixups, changed


def _header_info(header: bytes, alignment: int, name: str) -> ModelInfo:
    """The typed view of a header not yet written: read from memory, padded up to where its data would start."""
    padded = header + b"\0" * (-len(header) % alignment)
    try:
        h = read_header(FileSource(io.BytesIO(padded), name))
    except (GGUFError, SourceError) as exc:  # a bug in the writing above, never the input's fault
        raise AdaptError(f"the adapted header does not read back ({exc})") from None
    return info_from_headers([h])


# --- the data: copied as stored, every tensor hashed on the way, then the copy read back ---


def tensor_nbytes(t: TensorInfo) -> int:
    tr = TYPE_TRAITS[t.type]
    return t.n_elements // tr.blck_size * tr.type_size


def tensors_digest(tensors: Sequence[TensorInfo], digests: Sequence[str]) -> str:
    """One sha256 over every tensor's name, type, shape and data sha256, in file order (JSON, so unambiguous)."""
    rows = [
        [t.name, GGML_TYPE_NAMES.get(t.type, str(t.type)), list(t.shape), d]
        for t, d in zip(tensors, digests, strict=True)
    ]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def file_digests(path: str | os.PathLike[str], cap: int = DEFAULT_MAX_HEADER) -> tuple[str, str]:
    """A local file's whole sha256 and its tensors' digest (``tensors_sha256``, as ``adapt`` records it), in one
    read: how the registry checks that an adapted file holds its original's tensor data without trusting the keys
    of either. Raises AdaptError (one line) for a file that cannot be read whole."""
    try:
        src = FileSource.open(os.fspath(path))
    except SourceError as exc:
        raise AdaptError(str(exc)) from None
    with src:
        h = _read(src, cap)
        whole = hashlib.sha256()
        digests = []
        try:
            _copy(src, 0, h.data_offset, None, [whole])
            pos = h.data_offset
            for t in h.tensors:
                start = h.data_offset + t.offset
                _copy(src, pos, start, None, [whole])
                th = hashlib.sha256()
                pos = start + tensor_nbytes(t)
                _copy(src, start, pos, None, [whole, th])
                digests.append(th.hexdigest())
            if src.size is not None:
                _copy(src, pos, src.size, None, [whole])
        except SourceError as exc:
            raise AdaptError(str(exc)) from None
    return whole.hexdigest(), tensors_digest(h.tensors, digests)


def _copy(src: Source, lo: int, hi: int, out: BinaryIO | None, hashes: Sequence[_Hash]) -> None:
    while lo < hi:
        chunk = src.read_at(lo, min(COPY_CHUNK, hi - lo))
        if not chunk:
            raise AdaptError(f"{src.name}: ended at offset {lo:,} while being copied (was it changed meanwhile?)")
        for h in hashes:
            h.update(chunk)
        if out is not None:
            out.write(chunk)
        lo += len(chunk)


def tensor_sha256s(src: Source, h: Header) -> list[str]:
    """The sha256 of each tensor's data, in file order, read in chunks."""
    digests = []
    for t in h.tensors:
        th = hashlib.sha256()
        start = h.data_offset + t.offset
        _copy(src, start, start + tensor_nbytes(t), None, [th])
        digests.append(th.hexdigest())
    return digests


@dataclass
class _Written:
    draft_sha256: str
    tensors_sha256: str
    size: int
    check: PairCheck


def _write(
    out: Path,
    src: Source,
    d: Header,
    header: bytes,
    fixups: dict[str, int],
    alignment: int,
    target: ModelInfo,
    changed: set[str],
) -> _Written:
    fd, tmp_name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".partial")
    tmp = Path(tmp_name)
    done = False
    try:
        with os.fdopen(fd, "wb") as f:
            whole = hashlib.sha256()
            _copy(src, 0, d.data_offset, None, [whole])  # the draft's own header, for its sha256
            f.write(header)
            _pad(f, -len(header) % alignment)
            digests = []
            pos = d.data_offset
            for t in d.tensors:  # in file order; offsets ascend (read_header checked the layout)
                start = d.data_offset + t.offset
                _copy(src, pos, start, f, [whole])  # the padding between tensors, as stored
                th = hashlib.sha256()
                pos = start + tensor_nbytes(t)
                _copy(src, start, pos, f, [whole, th])
                digests.append(th.hexdigest())
            _pad(f, -f.tell() % alignment)
            if src.size is not None:
                _copy(src, pos, src.size, None, [whole])  # anything after the last tensor: hashed, not copied
            draft_sha, tensors_sha = whole.hexdigest(), tensors_digest(d.tensors, digests)
            for name, value in (("draft_sha256", draft_sha), ("tensors_sha256", tensors_sha)):
                f.seek(fixups[name])
                f.write(value.encode())
            f.flush()
            os.fsync(f.fileno())
        check = _verify(tmp, out, d, digests, alignment, target, changed)
        os.chmod(tmp, 0o644)
        size = tmp.stat().st_size
        os.replace(tmp, out)
        done = True
        return _Written(draft_sha, tensors_sha, size, check)
    except OSError as exc:
        raise AdaptError(f"{out}: cannot write ({exc.strerror or exc})") from None
    except SourceError as exc:
        raise AdaptError(str(exc)) from None
    finally:
        if not done:
            tmp.unlink(missing_ok=True)


def _verify(
    path: Path, shown: Path, d: Header, digests: list[str], alignment: int, target: ModelInfo, changed: set[str]
) -> PairCheck:
    """Read the written file back: the tensors as the draft's (name, type, shape, offset, order, bytes), the
    alignment carried, every key the plan left alone byte for byte, and check_pair against the target."""
    with FileSource.open(path) as src:
        h = _read(src, DEFAULT_MAX_HEADER)
        problems = []
        if [(t.name, t.type, t.shape, t.offset) for t in h.tensors] != [
            (t.name, t.type, t.shape, t.offset) for t in d.tensors
        ]:
            problems.append("its tensor infos differ from the draft's")
        if _alignment(h, max(alignment, DEFAULT_MAX_ALIGNMENT)) != alignment or h.data_offset % alignment:
            problems.append(f"its data is not aligned to the draft's {alignment} bytes")
        if h.data_complete is not True:
            problems.append("its tensor data is cut short")
        if not problems and tensor_sha256s(src, h) != digests:
            problems.append("a tensor's bytes differ from the draft's")
    if not problems:
        new_pairs = {k: h.buf[s:e] for k, s, e in _kv_spans(h)[0]}
        for key, s, e in _kv_spans(d)[0]:
            if key not in changed and new_pairs.get(key) != d.buf[s:e]:
                problems.append(f"key {key} is not the draft's")
                break
    if problems:  # a bug, never the input's fault: say what, keep nothing
        raise AdaptError(f"{shown}: the written copy failed its check ({'; '.join(problems)}); nothing was kept")
    check = check_pair(target, info_from_headers([h]))
    if not check.compatible:
        raise AdaptError(f"{shown}: the written copy is still {check.verdict}; nothing was kept")
    return check


# The rules adapt_draft can reconcile by rewriting the draft's tokenizer metadata (inspector.adapt.plan decides).
ADAPTABLE_RULES = ("bos", "eos", "token_text")


def adaptability(t: ModelInfo, d: ModelInfo, result: PairCheck) -> dict[str, Any] | None:
    """What adapt_draft would change to make the draft acceptable (``plan``'s own decision), or None: a compatible
    pair, another failing rule, or a plan that refuses."""
    if result.compatible or result.failed_rule not in ADAPTABLE_RULES:
        return None
    try:
        the_plan = plan(Side.from_info(t), Side.from_info(d))
    except NotAdaptable:
        return None
    return {"summary": the_plan.summary(), "changed_tokens": len(the_plan.changed_ids)}
