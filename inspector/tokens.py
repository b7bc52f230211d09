"""Token tables as raw byte ranges: text lookup, llama.cpp's comparison, fingerprints and index keys.

A table is the ``tokenizer.ggml.tokens`` array exactly as stored (length-prefixed strings), so
it can be hashed, compared and stored once per distinct vocabulary without a Python object per
token.
"""
from __future__ import annotations

import hashlib
import re
import struct
from array import array
from dataclasses import dataclass

# llama.cpp compares token texts from this id on (SPEC_VOCAB_CHECK_START_TOKEN_ID).
CHECK_START_ID = 5
# Vocabularies may differ in size by this many tokens (SPEC_VOCAB_MAX_SIZE_DIFFERENCE).
MAX_SIZE_DIFFERENCE = 128
# The vocabulary key hashes token texts [CHECK_START_ID, KEY_PREFIX): any two compatible
# vocabularies of at least KEY_PREFIX tokens agree there, so they share the key.
KEY_PREFIX = 4096


class TokenTable:
    """The array's elements as stored, (u64 length, bytes) repeated, inside ``buf[start:end]``.

    Offsets are absolute positions in ``buf`` so a table read from a header shares the header's
    bytes instead of copying them.
    """

    def __init__(self, blob: bytes, count: int, byteorder: str = "<", offsets: array | None = None,
                 start: int = 0, end: int | None = None) -> None:
        self.buf = blob
        self.count = count
        self.byteorder = byteorder
        self.start = start
        self.end = len(blob) if end is None else end
        if offsets is None:
            offsets = walk_offsets(blob[start : self.end], count, byteorder)
            if start:
                offsets = array("Q", (o + start for o in offsets))
        self.offsets = offsets
        self._unpack = struct.Struct(byteorder + "Q").unpack_from

    @classmethod
    def from_header(cls, buf: bytes, start: int, end: int, count: int, offsets: array, byteorder: str) -> TokenTable:
        return cls(buf, count, byteorder, offsets, start, end)

    @property
    def blob(self) -> bytes:
        return self.buf[self.start : self.end]

    def text(self, i: int) -> bytes:
        o = self.offsets[i]
        (n,) = self._unpack(self.buf, o)
        return self.buf[o + 8 : o + 8 + n]

    def llama_text(self, i: int) -> bytes:
        """The text llama.cpp compares: empty tokens become "[EMPTY_i]", and strcmp stops at NUL."""
        t = self.text(i)
        if not t:
            return f"[EMPTY_{i}]".encode()
        return t.split(b"\0", 1)[0]

    def region(self, lo: int, hi: int) -> bytes:
        """Raw bytes of elements [lo, hi)."""
        start = self.offsets[lo] if lo < self.count else self.end
        end = self.offsets[hi] if hi < self.count else self.end
        return self.buf[start:end]

    @property
    def sha256(self) -> str:
        """Fingerprint of the whole table, independent of the file's byte order."""
        return hashlib.sha256(self.canonical_blob()).hexdigest()

    def canonical_blob(self) -> bytes:
        if self.byteorder == "<":
            return self.blob
        return b"".join(struct.pack("<Q", len(t)) + t for t in map(self.text, range(self.count)))


def walk_offsets(blob: bytes, count: int, byteorder: str = "<") -> array:
    """Start offset of each element of a stored string array (used when loading a stored blob)."""
    offsets = array("Q", bytes(8 * count))
    unpack = struct.Struct(byteorder + "Q").unpack_from
    pos = 0
    for i in range(count):
        offsets[i] = pos
        (n,) = unpack(blob, pos)
        pos += 8 + n
    if pos != len(blob):
        raise ValueError(f"token table blob holds {len(blob)} bytes, its {count} entries need {pos}")
    return offsets


def vocab_key(vocab_type: str, table: TokenTable | None) -> str:
    """An index key under which a registry finds every file this one could be compatible with.

    Compatible vocabularies have identical token texts from id 5 up to the smaller size, so
    two of at least KEY_PREFIX tokens agree on [5, KEY_PREFIX) and share the hash — whatever
    their sizes (Qwen2.5's 151,936 and 152,064 included). Smaller vocabularies get the key
    "<type>:small"; ``candidate_keys`` says how to look both kinds up.
    """
    if table is None:
        return f"{vocab_type}:none"
    if table.count < KEY_PREFIX:
        return f"{vocab_type}:small"
    h = hashlib.sha256()
    for i in range(CHECK_START_ID, KEY_PREFIX):
        t = table.llama_text(i)
        h.update(struct.pack("<Q", len(t)) + t)
    return f"{vocab_type}:{h.hexdigest()[:40]}"


def candidate_keys(key: str) -> list[str] | None:
    """Keys whose files may be compatible with a file of ``key``; None means every key of its type.

    A small vocabulary (< KEY_PREFIX tokens) may match a file up to 128 tokens larger whose key is
    a hash, so small ones look at their whole vocab type (narrowed by size in the query).
    """
    vtype, _, rest = key.rpartition(":")
    if rest == "small":
        return None
    return [key, f"{vtype}:small"]


@dataclass(frozen=True)
class Mismatch:
    token_id: int
    target: bytes
    draft: bytes


def first_text_mismatch(a: TokenTable, b: TokenTable) -> Mismatch | None:
    """First id in [5, min(n)) whose texts differ as llama.cpp compares them, or None.

    Equal raw byte ranges prove equality in one comparison; otherwise a binary search on
    prefix equality finds the first differing element without walking every token.
    """
    n = min(a.count, b.count)
    same_order = a.byteorder == b.byteorder
    i = CHECK_START_ID
    while i < n:
        if same_order:
            if a.region(i, n) == b.region(i, n):
                return None
            i = _first_differing_element(a, b, i, n)
        ta, tb = a.llama_text(i), b.llama_text(i)
        if ta != tb:
            return Mismatch(i, ta, tb)
        i += 1  # raw bytes differed only where llama.cpp does not look (after a NUL, say)
    return None


def _first_differing_element(a: TokenTable, b: TokenTable, lo: int, hi: int) -> int:
    """Smallest i in [lo, hi) whose raw element differs (the ranges [lo, hi) are known to differ)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a.region(lo, mid) == b.region(lo, mid):
            lo = mid
        else:
            hi = mid
    return lo


def readable(text: bytes) -> str:
    """Token text for people, the one way specreg shows it: UTF-8 where it is, \\x escapes for other bytes."""
    return text.decode("utf-8", errors="backslashreplace")


# C0 and C1 controls (ESC, CSI, CR, newlines inside a value, …), plus the Unicode line separators and
# bidirectional overrides that make a terminal show text in another order than it is.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """Control characters as visible escapes (``\\x1b``, ``\\u202e``), so text from a file cannot drive a terminal."""
    return _CONTROL.sub(_escape, text)


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def quoted(text: bytes | None) -> str:
    """A token in a sentence or on a terminal: ``readable`` text with controls escaped, in quotes; "(none)" for none.

    Invalid bytes and control characters both read ``\\xNN`` this way (``repr`` would double the
    backslash of one and not the other).
    """
    return "(none)" if text is None else "'" + escape_controls(readable(text)) + "'"
