"""A streaming GGUF header reader: metadata and tensor infos, never the tensor data.

Written by hand because gguf-py's ``GGUFReader`` memory-maps the whole file (so it cannot read a
partial or remote file) and builds a numpy object per token (~13 s on a 262k-token vocabulary).
This reader pulls bytes from a ``Source`` on demand, checks every length against the bytes that
can exist before using it, keeps large arrays as byte ranges, and walks string arrays by their
length prefixes only. Constants come from ``ggml_constants`` (the pinned build's).
"""
from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from typing import Any

from .ggml_constants import GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUFValueType

from .readahead import next_read
from .sources import Source, SourceError

T = GGUFValueType
SCALAR_FORMATS: dict[int, str] = {
    T.UINT8: "B", T.INT8: "b", T.UINT16: "H", T.INT16: "h", T.UINT32: "I", T.INT32: "i",
    T.FLOAT32: "f", T.BOOL: "?", T.UINT64: "Q", T.INT64: "q", T.FLOAT64: "d",
}
SCALAR_SIZES = {t: struct.calcsize("<" + f) for t, f in SCALAR_FORMATS.items()}
MAX_NESTING = 4  # arrays of arrays nest this deep at most; real files use 1
SMALL_ARRAY = 64  # arrays up to this many elements are decoded; longer ones stay byte ranges
MIN_CHUNK = 256 * 1024


class GGUFError(Exception):
    """The bytes are not a readable GGUF header; the message is one line."""


@dataclass
class ArrayRef:
    """A large array kept as a byte range of the header instead of Python objects."""

    type: int  # element type
    count: int
    start: int  # offset of the first element
    end: int  # offset just past the last element
    offsets: array | None = None  # string arrays: start of each element (its length prefix)

    def describe(self) -> str:
        return f"[{self.count} × {T(self.type).name.lower()}]"


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    type: int
    offset: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class Header:
    """What a GGUF header holds, with the raw header bytes for byte-range access."""

    source: str
    version: int
    byteorder: str  # "<" or ">"
    kv: dict[str, Any]
    kv_types: dict[str, int]
    tensors: list[TensorInfo]
    header_size: int  # bytes up to the end of the tensor infos
    data_offset: int  # where tensor data starts (aligned)
    file_size: int | None
    buf: bytes = field(repr=False)
    bytes_fetched: int = 0

    def string_at(self, ref: ArrayRef, i: int) -> bytes:
        """Raw bytes of element ``i`` of a string array."""
        assert ref.offsets is not None
        o = ref.offsets[i]
        (n,) = struct.unpack_from(self.byteorder + "Q", self.buf, o)
        return self.buf[o + 8 : o + 8 + n]


class _Cursor:
    """Reads forward through a source, fetching more only when the parser needs it.

    Remote reads (``costly_reads``) are sized by ``readahead.next_read``: the first bytes, then
    up to an estimate of the header's end (usually two requests, ≤1.05× the header's bytes).
    Local reads grow by a quarter of what was read so far.
    """

    def __init__(self, src: Source, cap: int) -> None:
        self.src = src
        self.cap = cap
        self.buf = bytearray()
        self.pos = 0
        self.eof = False
        self.bo = "<"

    def need(self, n: int, what: str) -> None:
        end = self.pos + n
        if end <= len(self.buf):
            return
        if end > self.cap:
            raise GGUFError(f"{what} at offset {self.pos} would put the header past the {self.cap:,}-byte cap")
        size = self.src.size
        if size is not None and end > size:
            raise GGUFError(f"{what} at offset {self.pos} needs {n:,} bytes but the file ends at {size:,} (truncated or corrupt)")
        while len(self.buf) < end:
            if self.eof:
                raise GGUFError(f"{what} at offset {self.pos}: file ends at {len(self.buf):,} bytes (truncated)")
            if getattr(self.src, "costly_reads", False):
                # Each read is a round trip (HTTP Range): size it from what the header has shown so far.
                want = next_read(self.buf, end)
            else:  # a local file: reads are cheap, so grow by a quarter and never stop to estimate
                want = max(end - len(self.buf), MIN_CHUNK, len(self.buf) // 4)
            want = min(want, self.cap - len(self.buf))
            if size is not None:
                want = min(want, size - len(self.buf))
            data = self.src.read_at(len(self.buf), want)
            if len(data) < want:
                self.eof = True
            self.buf += data

    def remaining_known(self) -> int | None:
        size = self.src.size
        return None if size is None else size - self.pos

    def unpack(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        self.need(n, what)
        (v,) = struct.unpack_from(self.bo + fmt, self.buf, self.pos)
        self.pos += n
        return v

    def check_count(self, count: int, min_item: int, what: str) -> None:
        """Refuse a count that cannot fit in the bytes that exist (or under the cap)."""
        total = count * min_item
        rem = self.remaining_known()
        if rem is not None and total > rem:
            raise GGUFError(f"{what} at offset {self.pos} claims {count:,} items but only {rem:,} bytes remain (truncated or corrupt)")
        if self.pos + total > self.cap:
            raise GGUFError(f"{what} at offset {self.pos} claims {count:,} items, past the {self.cap:,}-byte header cap")

    def string(self, what: str) -> bytes:
        n = self.unpack("Q", what + " length")
        self.check_count(n, 1, what)
        self.need(n, what)
        s = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return s


def _value(c: _Cursor, vtype: int, key: str, depth: int) -> Any:
    if vtype in SCALAR_FORMATS:
        return c.unpack(SCALAR_FORMATS[vtype], f"value of {key}")
    if vtype == T.STRING:
        return c.string(f"value of {key}").decode("utf-8", errors="replace")
    if vtype == T.ARRAY:
        if depth >= MAX_NESTING:
            raise GGUFError(f"{key}: arrays nested deeper than {MAX_NESTING} levels")
        etype = c.unpack("I", f"array type of {key}")
        count = c.unpack("Q", f"array length of {key}")
        return _array(c, etype, count, key, depth + 1)
    raise GGUFError(f"{key}: unknown value type {vtype} at offset {c.pos - 4}")


def _array(c: _Cursor, etype: int, count: int, key: str, depth: int) -> Any:
    if etype in SCALAR_FORMATS:
        size = SCALAR_SIZES[etype]
        c.check_count(count, size, f"array {key}")
        if count <= SMALL_ARRAY:
            c.need(count * size, f"array {key}")
            vals = list(struct.unpack_from(f"{c.bo}{count}{SCALAR_FORMATS[etype]}", c.buf, c.pos))
            c.pos += count * size
            return vals
        start = c.pos
        c.need(count * size, f"array {key}")
        c.pos += count * size
        return ArrayRef(etype, count, start, c.pos)
    if etype == T.STRING:
        c.check_count(count, 8, f"array {key}")
        if count <= SMALL_ARRAY:
            return [c.string(f"{key}[{i}]").decode("utf-8", errors="replace") for i in range(count)]
        return _string_array(c, count, key)
    if etype == T.ARRAY:
        c.check_count(count, 12, f"array {key}")
        if depth >= MAX_NESTING:
            raise GGUFError(f"{key}: arrays nested deeper than {MAX_NESTING} levels")
        return [_value(c, T.ARRAY, key, depth) for _ in range(count)]
    raise GGUFError(f"{key}: unknown array element type {etype} at offset {c.pos - 12}")


def _string_array(c: _Cursor, count: int, key: str) -> ArrayRef:
    """Walk a string array by its length prefixes, recording where each element starts.

    This is the hot path (a vocabulary has up to ~260k tokens), so the loop does one unpack
    and one store per element; a single bounds check per element suffices because fetching
    the next length prefix also proves the previous string's bytes are there.
    """
    start = c.pos
    offsets = array("Q", bytes(8 * count))
    unpack = struct.Struct(c.bo + "Q").unpack_from
    buf = c.buf
    limit = len(buf) - 8
    pos = start
    for i in range(count):
        if pos > limit:
            c.pos = pos
            c.need(8, f"{key}[{i}]")
            buf = c.buf
            limit = len(buf) - 8
        offsets[i] = pos
        pos += 8 + unpack(buf, pos)[0]
    c.pos = offsets[count - 1] if count else start
    c.need(pos - c.pos, f"{key}[{count - 1}]")
    c.pos = pos
    return ArrayRef(T.STRING, count, start, pos, offsets)


def read_header(src: Source, max_header_bytes: int = 256 * 1024 * 1024, tensors: bool = True) -> Header:
    """Parse the header of the GGUF behind ``src``: metadata, then (optionally) tensor infos."""
    c = _Cursor(src, max_header_bytes)
    try:
        return _read(c, src, tensors)
    except struct.error as exc:  # only on an internal slip; keep it one line
        raise GGUFError(f"malformed header near offset {c.pos} ({exc})") from None


def _read(c: _Cursor, src: Source, want_tensors: bool) -> Header:
    if src.size is not None and src.size < 4:
        raise GGUFError(f"not a GGUF file (only {src.size} bytes)")
    c.need(4, "magic")
    if struct.unpack_from("<I", c.buf, 0)[0] != GGUF_MAGIC:
        head = bytes(c.buf[:4])
        raise GGUFError(f"not a GGUF file (magic {head!r}, expected b'GGUF')")
    c.pos = 4
    version = c.unpack("I", "version")
    if version & 0xFFFF == 0:  # written big-endian: the version reads byte-swapped
        c.bo = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version == 1:
        raise GGUFError("GGUF version 1 is not supported (it predates llama.cpp's current format; reconvert the model)")
    if version not in (2, 3):
        raise GGUFError(f"unknown GGUF version {version}")
    n_tensors = c.unpack("Q", "tensor count")
    n_kv = c.unpack("Q", "metadata count")
    c.check_count(n_kv, 8 + 4 + 1, "metadata count")
    kv: dict[str, Any] = {}
    kv_types: dict[str, int] = {}
    for i in range(n_kv):
        raw = c.string(f"key #{i}")
        try:
            key = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"key #{i} at offset {c.pos - len(raw)} is not valid UTF-8") from None
        vtype = c.unpack("I", f"type of {key}")
        kv_types[key] = vtype
        kv[key] = _value(c, vtype, key, 0)
    infos: list[TensorInfo] = []
    if want_tensors:
        c.check_count(n_tensors, 8 + 4 + 4 + 8, "tensor count")
        for i in range(n_tensors):
            name = c.string(f"tensor #{i} name").decode("utf-8", errors="replace")
            n_dims = c.unpack("I", f"tensor {name} dimensions")
            if n_dims > 8:
                raise GGUFError(f"tensor {name} claims {n_dims} dimensions (GGML allows at most 4)")
            shape = tuple(c.unpack("Q", f"tensor {name} shape") for _ in range(n_dims))
            ttype = c.unpack("I", f"tensor {name} type")
            offset = c.unpack("Q", f"tensor {name} offset")
            infos.append(TensorInfo(name, shape, ttype, offset))
    alignment = kv.get("general.alignment", GGUF_DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise GGUFError(f"general.alignment must be a power of two, got {alignment!r}")
    header_size = c.pos
    data_offset = -(-header_size // alignment) * alignment if want_tensors else header_size
    return Header(
        source=src.name, version=version, byteorder=c.bo, kv=kv, kv_types=kv_types, tensors=infos,
        header_size=header_size, data_offset=data_offset, file_size=src.size,
        buf=bytes(c.buf[:header_size]), bytes_fetched=src.bytes_fetched,
    )


__all__ = ["ArrayRef", "GGUFError", "Header", "SourceError", "TensorInfo", "read_header"]
