"""Token tables as raw byte ranges: text lookup, llama.cpp's comparison, fingerprints and index keys.

A table is the ``tokenizer.ggml.tokens`` array exactly as stored (length-prefixed strings), so
it can be hashed, compared and stored once per distinct vocabulary without a Python object per
token. Whole-table work (byte-swapping, hashing, comparing) runs in numpy over slices of at most
CHUNK_BYTES, so its time follows the table's bytes and its temporaries stay a few MiB whatever the
table's size: a 16 MB header of two million one-byte tokens costs no more than a real vocabulary.
"""

from __future__ import annotations

import functools
import hashlib
import re
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: reading a small local file never loads it
    import numpy as np
    from typing_extensions import Buffer

# llama.cpp compares token texts from this id on (SPEC_VOCAB_CHECK_START_TOKEN_ID).
CHECK_START_ID = 5
# Vocabularies may differ in size by this many tokens (SPEC_VOCAB_MAX_SIZE_DIFFERENCE).
MAX_SIZE_DIFFERENCE = 128
# The vocabulary key hashes token texts [CHECK_START_ID, KEY_PREFIX): any two compatible
# vocabularies of at least KEY_PREFIX tokens agree there, so they share the key.
KEY_PREFIX = 4096
# Bytes of a table one numpy step handles (a single longer token is a step of its own): index arrays
# cost 8 bytes per byte handled, so this bounds their memory, while steps stay few (16 for 16 MB).
CHUNK_BYTES = 1 << 20


class TokenTable:
    """The array's elements as stored, (u64 length, bytes) repeated, inside ``buf[start:end]``.

    Offsets are absolute positions in ``buf`` so a table read from a header shares the header's
    bytes instead of copying them.
    """

    def __init__(
        self,
        blob: bytes,
        count: int,
        byteorder: str = "<",
        offsets: array[int] | None = None,
        start: int = 0,
        end: int | None = None,
    ) -> None:
        self.buf = blob
        self.count = count
        self.byteorder = byteorder
        self.start = start
        self.end = len(blob) if end is None else end
        if offsets is None:  # walked in place: neither a copy of the bytes nor a shifted copy of the offsets
            offsets = walk_offsets(blob, count, byteorder, start=start, end=self.end)
        self.offsets = offsets
        self._unpack = struct.Struct(byteorder + "Q").unpack_from
        self._sha256: str | None = None

    @classmethod
    def from_header(
        cls, buf: bytes, start: int, end: int, count: int, offsets: array[int], byteorder: str
    ) -> TokenTable:
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
        """Fingerprint of the whole table, independent of the file's byte order (the hash of ``canonical_blob``)."""
        if self._sha256 is None:  # computed once: inspection and registration both ask
            h = hashlib.sha256()
            if self.byteorder == "<":
                h.update(memoryview(self.buf)[self.start : self.end])
            else:  # hashed slice by slice: the little-endian copy is never whole
                for lo, hi in self._chunks(0, self.count):
                    h.update(self._little_endian(lo, hi))
            self._sha256 = h.hexdigest()
        return self._sha256

    def canonical_blob(self) -> bytes:
        """The table as a little-endian file stores it: what a registry keeps and hashes."""
        if self.byteorder == "<":
            return self.blob
        return b"".join([self._little_endian(lo, hi) for lo, hi in self._chunks(0, self.count)])

    # --- vectorised helpers: numpy over [lo, hi) id ranges, never a Python object per token ---

    def _starts(self) -> np.ndarray:
        """Each element's offset as a numpy view of ``offsets`` (no copy)."""
        import numpy as np

        if not self.count:
            return np.zeros(0, np.uint64)
        return np.frombuffer(self.offsets, dtype=np.uint64, count=self.count)

    def _pos(self, i: int) -> int:
        """Where element ``i`` starts; ``end`` for i == count."""
        return int(self.offsets[i]) if i < self.count else self.end

    def _lengths(self, lo: int, hi: int) -> np.ndarray:
        """Stored text lengths of elements [lo, hi): the elements are contiguous, so the offsets say them."""
        import numpy as np

        starts = self._starts()
        nxt = np.empty(hi - lo, np.int64)
        nxt[:-1] = starts[lo + 1 : hi]
        nxt[-1:] = self._pos(hi)
        return nxt - starts[lo:hi].astype(np.int64) - 8

    def _chunk_end(self, lo: int, hi: int) -> int:
        """The end of the id range from ``lo`` whose bytes fit in CHUNK_BYTES (one token at least)."""
        limit = self._pos(lo) + CHUNK_BYTES
        if self._pos(hi) <= limit:
            return hi
        import numpy as np

        # the last element starting within the limit: every element before it ends by then
        last = lo + int(np.searchsorted(self._starts()[lo:hi], limit, side="right")) - 1
        return max(last, lo + 1)

    def _chunks(self, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        while lo < hi:
            end = self._chunk_end(lo, hi)
            yield lo, end
            lo = end

    def _bytes(self, lo: int, hi: int) -> np.ndarray:
        """The raw bytes of elements [lo, hi) as a numpy view (no copy)."""
        import numpy as np

        s = self._pos(lo)
        return np.frombuffer(self.buf, np.uint8, count=self._pos(hi) - s, offset=s)

    def _little_endian(self, lo: int, hi: int) -> Buffer:
        """Elements [lo, hi) with little-endian length prefixes: the bytes themselves, or a swapped copy."""
        if self.byteorder == "<":
            return memoryview(self.buf)[self._pos(lo) : self._pos(hi)]
        import numpy as np

        out = self._bytes(lo, hi).copy()
        prefix = (self._starts()[lo:hi] - self._pos(lo)).astype(np.intp)[:, None] + np.arange(8)
        out[prefix] = out[prefix[:, ::-1]]  # the right side is gathered (a copy) before the store
        return out.data  # a memoryview of the swapped copy

    def _texts(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For elements [lo, hi): their raw bytes, each text's start in them, its stored length, and the
        length llama.cpp compares (strcmp stops at the first NUL). The range must lie within CHUNK_BYTES."""
        import numpy as np

        raw = self._bytes(lo, hi)
        text = (self._starts()[lo:hi] - self._pos(lo)).astype(np.int64) + 8
        stored = self._lengths(lo, hi)
        # the first zero byte at or after a text's start: length prefixes hold zeros too, but the next
        # one starts only where this text ends, so a zero found past the text means none in it
        zeros = np.flatnonzero(raw == 0)
        first = np.append(zeros, len(raw))[np.searchsorted(zeros, text)]
        return raw, text, stored, np.minimum(stored, first - text)


@functools.cache
def _powers_of_ten() -> np.ndarray:
    import numpy as np

    return 10 ** np.arange(19, dtype=np.int64)


def _spans(src: np.ndarray, dst: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays that copy ``lengths[i]`` bytes from ``src[i]`` to ``dst[i]``, for every i at once."""
    import numpy as np

    total = int(lengths.sum())
    step = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(src, lengths) + step, np.repeat(dst, lengths) + step


def _empty_texts(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """b"[EMPTY_<id>]" for each id (llama.cpp's text for an empty token), concatenated, and their lengths.

    ``ids`` ascend, so ids of one digit count are one run: each run is one (n, 8 + digits) matrix.
    """
    import numpy as np

    digits = np.searchsorted(_powers_of_ten(), np.maximum(ids, 1), side="right")  # id 0 has one digit
    parts = []
    for d in np.unique(digits).tolist():
        run = ids[digits == d]
        rows = np.empty((len(run), 8 + d), np.uint8)
        rows[:, :7] = np.frombuffer(b"[EMPTY_", np.uint8)
        rows[:, 7:-1] = run[:, None] // _powers_of_ten()[d - 1 :: -1] % 10 + ord("0")
        rows[:, -1] = ord("]")
        parts.append(rows.ravel())
    return (np.concatenate(parts) if parts else np.zeros(0, np.uint8)), 8 + digits


def walk_offsets(
    blob: bytes, count: int, byteorder: str = "<", *, start: int = 0, end: int | None = None
) -> array[int]:
    """Start offset of each element of a stored string array in ``blob[start:end]``, as positions in ``blob``.

    Each offset follows from the previous element's length, so this one loop stays sequential; it does
    one unpack and one store per element and allocates nothing per element (8 bytes of ``array`` each).
    """
    end = len(blob) if end is None else end
    if count * 8 > end - start:  # every element has its 8-byte length: refuse before allocating
        raise ValueError(f"token table blob holds {end - start} bytes, too few for {count} entries")
    offsets = array("Q", [0]) * count
    unpack = struct.Struct(byteorder + "Q").unpack_from
    pos = start
    try:
        for i in range(count):
            offsets[i] = pos
            pos += 8 + unpack(blob, pos)[0]
    except (struct.error, OverflowError):  # a length past the blob (or past 64 bits)
        pos = -1
    if pos != end:
        raise ValueError(f"token table blob holds {end - start} bytes, its {count} entries do not fill it exactly")
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

    Equal raw byte ranges prove equality in one comparison (of the whole range, then of each slice);
    a slice that differs is compared text by text in numpy, so tables that differ in every token only
    after a NUL (or in byte order) cost time in proportion to their bytes, not a Python step per token.
    """
    n = min(a.count, b.count)
    same_order = a.byteorder == b.byteorder
    if n <= CHECK_START_ID or (same_order and _same_bytes(a, b, CHECK_START_ID, n)):
        return None
    lo = CHECK_START_ID
    while lo < n:
        hi = min(a._chunk_end(lo, n), b._chunk_end(lo, n))
        if not (same_order and _same_bytes(a, b, lo, hi)):
            if hi - lo == 1:  # one long token: compared as bytes
                i = lo if a.llama_text(lo) != b.llama_text(lo) else None
            else:
                i = _first_differing_text(a, b, lo, hi)
            if i is not None:
                return Mismatch(i, a.llama_text(i), b.llama_text(i))
        lo = hi
    return None


def _same_bytes(a: TokenTable, b: TokenTable, lo: int, hi: int) -> bool:
    """Elements [lo, hi) byte for byte equal (memoryviews: compared in place, no copy)."""
    return memoryview(a.buf)[a._pos(lo) : a._pos(hi)] == memoryview(b.buf)[b._pos(lo) : b._pos(hi)]


def _first_differing_text(a: TokenTable, b: TokenTable, lo: int, hi: int) -> int | None:
    """Smallest i in [lo, hi) whose ``llama_text`` differs between the tables, all texts compared at once."""
    import numpy as np

    ra, ta, sa, ea = a._texts(lo, hi)
    rb, tb, sb, eb = b._texts(lo, hi)
    empty_a, empty_b = sa == 0, sb == 0
    # Two empty tokens read "[EMPTY_i]" alike; one empty token equals only that literal (checked below).
    differ = empty_a != empty_b
    both = ~empty_a & ~empty_b
    differ |= both & (ea != eb)
    same = np.flatnonzero(both & (ea == eb))
    ia, ib = _spans(ta[same], tb[same], ea[same])
    _mark(differ, same, ea[same], ra[ia] != rb[ib])
    for empty, raw, text, length in ((empty_a, rb, tb, eb), (empty_b, ra, ta, ea)):
        one = np.flatnonzero(empty & ~(empty_a & empty_b))  # this side empty, the other not
        if len(one):
            differ[one[_reads_empty(raw, text[one], length[one], one + lo)]] = False
    first = np.flatnonzero(differ)
    return lo + int(first[0]) if len(first) else None


def _reads_empty(raw: np.ndarray, text: np.ndarray, length: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which of these texts (at ``text`` in ``raw``, ``length`` bytes as compared) read b"[EMPTY_<id>]"."""
    import numpy as np

    literal, want = _empty_texts(ids)
    fits = length == want
    literal, want = literal[np.repeat(fits, want)], want[fits]
    src, dst = _spans(text[fits], np.cumsum(want) - want, want)
    equal = np.ones(len(want), bool)
    _mark(equal, np.arange(len(want)), want, raw[src] != literal[dst], value=False)
    out = np.zeros(len(ids), bool)
    out[np.flatnonzero(fits)] = equal
    return out


def _mark(flags: np.ndarray, ids: np.ndarray, lengths: np.ndarray, byte_hits: np.ndarray, value: bool = True) -> None:
    """Set ``flags[ids[k]] = value`` for each k whose run of ``lengths[k]`` bytes (runs laid end to end, as
    ``_spans`` lays them) holds a True in ``byte_hits``."""
    import numpy as np

    hits = np.flatnonzero(byte_hits)
    if len(hits):  # a byte's run: the first one ending past it
        flags[ids[np.searchsorted(np.cumsum(lengths), hits, side="right")]] = value


def readable(text: bytes) -> str:
    """Token text for people, the one way specreg shows it: UTF-8 where it is, \\x escapes for other bytes."""
    return text.decode("utf-8", errors="backslashreplace")


# C0 and C1 controls (ESC, CSI, CR, newlines inside a value, …), plus the Unicode line separators and
# bidirectional overrides that make a terminal show text in another order than it is.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """Control characters as visible escapes (``\\x1b``, ``\\u202e``), so text from a file cannot drive a terminal."""
    return _CONTROL.sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def quoted(text: bytes | None) -> str:
    """A token in a sentence or on a terminal: ``readable`` text with controls escaped, in quotes; "(none)" for none.

    Invalid bytes and control characters both read ``\\xNN`` this way (``repr`` would double the
    backslash of one and not the other).
    """
    return "(none)" if text is None else "'" + escape_controls(readable(text)) + "'"
