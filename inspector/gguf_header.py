"""A streaming GGUF header reader: metadata and tensor infos, never the tensor data.

Written by hand because gguf-py's ``GGUFReader`` memory-maps the whole file (so it cannot read a
partial or remote file) and builds a numpy object per token (seconds for a large vocabulary).
This reader pulls bytes from a ``Source`` on demand, checks every length against the bytes that
can exist before using it, keeps large arrays as byte ranges, and walks string arrays by their
length prefixes only. Constants come from ``ggml_constants`` and ``ggml_types`` (the pinned build's).

It refuses what ``gguf_init_from_file_impl`` (ggml/src/gguf.cpp, b11434) refuses from the header
alone, in the same order, with llama.cpp's reason in words; tests/inspector/test_gguf_agrees.py holds the two
verdicts equal on generated files. Its cost is bounded: every count is checked against the bytes
that exist (and fetched) before anything is allocated for it, arrays are walked without a Python
object per element, and the objects a header may make are capped (MAX_KEYS, MAX_TENSORS,
DECODE_BUDGET), so time follows the header's bytes and memory stays within a few times them.
One thing differs on purpose: a big-endian file is read (llama.cpp reads it only on a big-endian host).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from typing import Any

from .ggml_constants import GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUFValueType
from .ggml_types import GGML_MAX_DIMS, GGML_MAX_NAME, GGML_TYPE_COUNT, TYPE_TRAITS, TypeTraits
from .readahead import next_read
from .sources import Source, SourceError

T = GGUFValueType
SCALAR_FORMATS: dict[int, str] = {
    T.UINT8: "B",
    T.INT8: "b",
    T.UINT16: "H",
    T.INT16: "h",
    T.UINT32: "I",
    T.INT32: "i",
    T.FLOAT32: "f",
    T.BOOL: "?",
    T.UINT64: "Q",
    T.INT64: "q",
    T.FLOAT64: "d",
}
SCALAR_SIZES = {t: struct.calcsize("<" + f) for t, f in SCALAR_FORMATS.items()}
SMALL_ARRAY = 64  # arrays up to this many elements are decoded; longer ones stay byte ranges
MIN_CHUNK = 256 * 1024

# gguf.cpp's own limits, and its integer widths.
GGUF_MAX_STRING_LENGTH = 1024 * 1024 * 1024
GGUF_MAX_ARRAY_ELEMENTS = 1024 * 1024 * 1024
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
GGUF_VERSION = 3

# specreg's cost budget for one header (llama.cpp has none): real models have under 100 keys and at
# most a few thousand tensors, while each key or tensor costs ~150-250 bytes of Python objects for as
# few as 14-25 bytes of header. The caps bound that memory (~1 MB of keys, ~4 MB of tensor infos,
# ~1 MB of decoded values) whatever the header's size; everything else follows its bytes.
MAX_KEYS = 4_096
MAX_TENSORS = 16_384
DECODE_BUDGET = 16_384  # small-array elements decoded to Python values per header; the rest stay ArrayRefs

# Fewest bytes one item can take: a key-value pair (key length, a 1-byte key, type, a u8 value),
# a string-array element (its length), a tensor info (name length, n_dims, type, offset).
MIN_KV = 8 + 1 + 4 + 1
MIN_TENSOR_INFO = 8 + 4 + 4 + 8


class GGUFError(Exception):
    """The bytes are not a readable GGUF header; the message is one line."""


class GGUFTruncated(GGUFError):
    """The bytes ended before the header did; ``need`` is a lower bound of where the header ends."""

    def __init__(self, message: str, need: int) -> None:
        super().__init__(message)
        self.need = need


@dataclass(slots=True)
class ArrayRef:
    """A large array kept as a byte range of the header instead of Python objects."""

    type: int  # element type
    count: int
    start: int  # offset of the first element
    end: int  # offset just past the last element
    offsets: array[int] | None = None  # string arrays: start of each element (its length prefix)

    def describe(self) -> str:
        return f"[{self.count} × {T(self.type).name.lower()}]"


@dataclass(slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    type: int
    offset: int  # of its data, from the start of the data section

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
    data_end: int = 0  # just past the last tensor's data (data_offset when there are no tensors)
    data_complete: bool | None = True  # every tensor's data inside the file; None: the file's size is unknown


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
        # Fewest bytes the structures around the current item still need (items left × their minimum
        # size): a truncation error adds it, so its ``need`` is a lower bound of the header's end.
        self.after = 0
        self.decoded = 0  # small-array elements turned into Python objects so far (DECODE_BUDGET)

    def need(self, n: int, what: str) -> None:
        end = self.pos + n
        if end <= len(self.buf):
            return
        if end > self.cap:
            raise GGUFError(f"{what} at offset {self.pos} would put the header past the {self.cap:,}-byte cap")
        size = self.src.size
        if size is not None and end > size:
            raise GGUFTruncated(
                f"{what} at offset {self.pos} needs {n:,} bytes but the file ends at {size:,} (truncated or corrupt)",
                end + self.after,
            )
        while len(self.buf) < end:
            if self.eof:
                raise GGUFTruncated(
                    f"{what} at offset {self.pos}: file ends at {len(self.buf):,} bytes (truncated)", end + self.after
                )
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
            raise GGUFError(
                f"{what} at offset {self.pos} claims {count:,} items but only {rem:,} bytes remain "
                "(truncated or corrupt)"
            )
        if self.pos + total > self.cap:
            raise GGUFError(
                f"{what} at offset {self.pos} claims {count:,} items, past the {self.cap:,}-byte header cap"
            )

    def string(self, what: str) -> bytes:
        n = self.unpack("Q", what + " length")
        if n > GGUF_MAX_STRING_LENGTH:
            raise GGUFError(
                f"{what} at offset {self.pos - 8} is {n:,} bytes long, over llama.cpp's limit of "
                f"{GGUF_MAX_STRING_LENGTH:,} bytes per string"
            )
        self.check_count(n, 1, what)
        self.need(n, what)
        s = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return s


def _shown(name: str | bytes) -> str:
    """A name from the file for an error message: decoded, and short."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", errors="backslashreplace")
    return name if len(name) <= 80 else name[:77] + "..."


def _value(c: _Cursor, vtype: int, key: str) -> Any:
    if vtype in SCALAR_FORMATS:
        return c.unpack(SCALAR_FORMATS[vtype], f"value of {key}")
    if vtype == T.STRING:
        return c.string(f"value of {key}").decode("utf-8", errors="replace")
    if vtype == T.ARRAY:
        etype = c.unpack("i", f"array type of {key}")
        count = c.unpack("Q", f"array length of {key}")
        return _array(c, etype, count, key)
    raise GGUFError(f"key '{_shown(key)}' has unknown value type {vtype} (llama.cpp knows types 0 to {len(T) - 1})")


def _array(c: _Cursor, etype: int, count: int, key: str) -> Any:
    if etype == T.ARRAY:  # gguf.cpp has no reader for these; gguf-py can write them
        raise GGUFError(f"key '{_shown(key)}' is an array of arrays, which llama.cpp cannot read")
    if etype not in SCALAR_FORMATS and etype != T.STRING:
        raise GGUFError(
            f"key '{_shown(key)}' is an array of unknown value type {etype} (llama.cpp knows types 0 to {len(T) - 1})"
        )
    if count > GGUF_MAX_ARRAY_ELEMENTS:
        raise GGUFError(
            f"array {_shown(key)} has {count:,} elements, over llama.cpp's limit of {GGUF_MAX_ARRAY_ELEMENTS:,}"
        )
    decode = count <= SMALL_ARRAY and c.decoded + count <= DECODE_BUDGET
    if etype in SCALAR_FORMATS:
        size = SCALAR_SIZES[etype]
        c.check_count(count, size, f"array {key}")
        c.need(count * size, f"array {key}")
        start = c.pos
        c.pos += count * size
        if decode:
            c.decoded += count
            return list(struct.unpack_from(f"{c.bo}{count}{SCALAR_FORMATS[etype]}", c.buf, start))
        return ArrayRef(etype, count, start, c.pos)
    c.check_count(count, 8, f"array {key}")
    # Every element has at least its 8-byte length: fetch those bytes (they prove the count) before
    # allocating anything per element.
    c.need(count * 8, f"array {key}")
    if decode:
        c.decoded += count
        return [c.string(f"{key}[{i}]").decode("utf-8", errors="replace") for i in range(count)]
    return _string_array(c, count, key)


def _string_array(c: _Cursor, count: int, key: str) -> ArrayRef:
    """Walk a string array by its length prefixes, recording where each element starts.

    This is the hot path (a vocabulary has up to ~260k tokens), so the loop does one unpack
    and one store per element; a single bounds check per element suffices because fetching
    the next length prefix also proves the previous string's bytes are there.
    """
    start = c.pos
    offsets = array("Q", [0]) * count  # made in place: no temporary of the same size
    unpack = struct.Struct(c.bo + "Q").unpack_from
    buf = c.buf
    limit = len(buf) - 8
    pos = start
    after = c.after
    for i in range(count):
        if pos > limit:
            c.pos = pos
            c.after = after + (count - i - 1) * 8
            c.need(8, f"{key}[{i}]")
            buf = c.buf
            limit = len(buf) - 8
        offsets[i] = pos
        pos += 8 + unpack(buf, pos)[0]
    c.pos = offsets[count - 1] if count else start
    c.after = after
    c.need(pos - c.pos, f"{key}[{count - 1}]")
    c.pos = pos
    if pos - start - 8 * count > GGUF_MAX_STRING_LENGTH:  # only then can one element be over the limit
        import numpy as np  # here only: reading a header needs no numpy otherwise

        # each element's length is the step to the next offset: one numpy pass, no object per element
        starts = np.frombuffer(offsets, dtype=np.uint64)
        longest = int(max(np.diff(starts).max(initial=0), pos - starts[-1])) - 8
        if longest > GGUF_MAX_STRING_LENGTH:
            raise GGUFError(
                f"array {_shown(key)} holds a string of {longest:,} bytes, over llama.cpp's limit of "
                f"{GGUF_MAX_STRING_LENGTH:,} bytes per string"
            )
    return ArrayRef(T.STRING, count, start, pos, offsets)


def _ggml_nbytes(ne: list[int], tr: TypeTraits) -> int:
    """ggml_nbytes of a tensor, with size_t's wrap-around (ggml/src/ggml.c), from its four dims."""
    if any(d <= 0 for d in ne):
        return 0
    nb = [tr.type_size, 0, 0, 0]
    nb[1] = (nb[0] * (ne[0] // tr.blck_size)) & UINT64_MAX
    nb[2] = (nb[1] * ne[1]) & UINT64_MAX
    nb[3] = (nb[2] * ne[2]) & UINT64_MAX
    if tr.blck_size == 1:
        n = tr.type_size
        for i in range(4):
            n = (n + (ne[i] - 1) * nb[i]) & UINT64_MAX
        return n
    n = ((ne[0] * nb[0]) & UINT64_MAX) // tr.blck_size
    for i in range(1, 4):
        n = (n + (ne[i] - 1) * nb[i]) & UINT64_MAX
    return n


def read_header(src: Source, max_header_bytes: int = 256 * 1024 * 1024, tensors: bool = True) -> Header:
    """Parse the header of the GGUF behind ``src``: metadata, then (optionally) tensor infos."""
    c = _Cursor(src, max_header_bytes)
    try:
        return _read(c, src, tensors)
    except struct.error as exc:  # only on an internal slip; keep it one line
        raise GGUFError(f"malformed header near offset {c.pos} ({exc})") from None


def _read(c: _Cursor, src: Source, want_tensors: bool) -> Header:
    version = _magic_and_version(c, src)
    n_tensors, n_kv = _counts(c, want_tensors)
    tail = n_tensors * MIN_TENSOR_INFO if want_tensors else 0
    kv, kv_types = _metadata(c, n_kv, tail)
    c.after = tail
    alignment = _alignment(kv, kv_types)
    nbytes = array("Q")  # ggml_nbytes of each tensor, for the layout check
    infos = _tensor_infos(c, n_tensors, nbytes) if want_tensors else []
    header_size = c.pos
    data_offset = header_size
    size = src.size
    if infos:
        data_offset = -(-header_size // alignment) * alignment
        if size is not None and data_offset > size:
            raise GGUFError(
                f"the tensor data would start at offset {data_offset:,} (the header padded to "
                f"{alignment} bytes), past the end of the file at {size:,}"
            )
    data_end = _check_offsets(infos, nbytes, alignment) + data_offset
    complete = True if not infos else None if size is None else data_end <= size
    buf = bytes(memoryview(c.buf)[:header_size])  # one copy, not a slice and then a copy
    return Header(
        source=src.name,
        version=version,
        byteorder=c.bo,
        kv=kv,
        kv_types=kv_types,
        tensors=infos,
        header_size=header_size,
        data_offset=data_offset,
        file_size=size,
        buf=buf,
        bytes_fetched=src.bytes_fetched,
        data_end=data_end,
        data_complete=complete,
    )


def _magic_and_version(c: _Cursor, src: Source) -> int:
    """The version after the magic, the cursor's byte order set by it (a big-endian file reads it swapped)."""
    if src.size is not None and src.size < 4:
        raise GGUFError(f"not a GGUF file (only {src.size} bytes)")
    c.need(4, "magic")
    if struct.unpack_from("<I", c.buf, 0)[0] != GGUF_MAGIC:
        head = bytes(c.buf[:4])
        raise GGUFError(f"not a GGUF file (magic {head!r}, expected b'GGUF')")
    c.pos = 4
    version = c.unpack("I", "version")
    if version == 0:
        raise GGUFError("GGUF version 0 is not a valid version (corrupt header)")
    if version & 0xFFFF == 0:  # written big-endian: the version reads byte-swapped
        c.bo = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version == 1:
        raise GGUFError("GGUF version 1 is not supported (it predates llama.cpp's current format; reconvert the model)")
    if version & 0xFFFF == 0 or version > GGUF_VERSION:
        raise GGUFError(f"unknown GGUF version {version} (llama.cpp reads versions 2 and {GGUF_VERSION})")
    return int(version)


def _counts(c: _Cursor, want_tensors: bool) -> tuple[int, int]:
    """The tensor and metadata counts, each bounded by what the file can hold and by specreg's limits."""
    n_tensors = c.unpack("q", "tensor count")
    if n_tensors < 0:
        raise GGUFError(f"the tensor count is negative ({n_tensors:,}): corrupt header")
    n_kv = c.unpack("q", "metadata count")
    if n_kv < 0:
        raise GGUFError(f"the metadata key count is negative ({n_kv:,}): corrupt header")
    c.check_count(n_kv, MIN_KV, "metadata count")
    if want_tensors:
        c.check_count(n_tensors, MIN_TENSOR_INFO, "tensor count")
    if n_kv > MAX_KEYS:
        raise GGUFError(
            f"the header declares {n_kv:,} metadata keys; specreg reads at most {MAX_KEYS:,} "
            "(real models have under a hundred)"
        )
    if want_tensors and n_tensors > MAX_TENSORS:
        raise GGUFError(f"the header declares {n_tensors:,} tensors; specreg reads at most {MAX_TENSORS:,} per file")
    return n_tensors, n_kv


def _metadata(c: _Cursor, n_kv: int, tail: int) -> tuple[dict[str, Any], dict[str, int]]:
    """Every key-value pair, refusing what llama.cpp refuses (empty or repeated keys); ``tail`` is the least the
    tensor infos after them take, so a count the rest of the file cannot hold fails before it is read."""
    kv: dict[str, Any] = {}
    kv_types: dict[str, int] = {}
    odd_keys: set[bytes] = set()  # keys that are not UTF-8, compared as the bytes llama.cpp compares
    for i in range(n_kv):
        c.after = (n_kv - i - 1) * MIN_KV + tail
        raw = c.string(f"key #{i}")
        if not raw:
            raise GGUFError(f"metadata key #{i} is empty (llama.cpp refuses files with an empty key)")
        try:
            key = raw.decode("utf-8")
            duplicate = key in kv_types
        except UnicodeDecodeError:  # llama.cpp takes any bytes; show them escaped
            key = raw.decode("utf-8", errors="backslashreplace")
            duplicate = raw in odd_keys
            odd_keys.add(raw)
            while key in kv_types and not duplicate:  # an escaped form that a UTF-8 key spells literally
                key += "'"
        if duplicate:
            raise GGUFError(f"metadata key '{_shown(key)}' appears twice (pair #{i}); llama.cpp refuses duplicate keys")
        shown = _shown(key)  # messages name the key, but never carry a megabyte-long one
        vtype = c.unpack("i", f"type of {shown}")
        kv_types[key] = vtype
        kv[key] = _value(c, vtype, shown)
    return kv, kv_types


def _alignment(kv: dict[str, Any], kv_types: dict[str, int]) -> int:
    """general.alignment as llama.cpp reads it: a uint32 power of two, 32 when absent."""
    alignment = GGUF_DEFAULT_ALIGNMENT
    if "general.alignment" in kv_types:
        if kv_types["general.alignment"] != T.UINT32:
            name = (
                T(kv_types["general.alignment"]).name.lower()
                if kv_types["general.alignment"] in T._value2member_map_
                else "?"
            )
            raise GGUFError(f"general.alignment is stored as {name}; llama.cpp requires a uint32")
        alignment = int(kv["general.alignment"])
        if alignment == 0 or alignment & (alignment - 1):
            raise GGUFError(f"general.alignment must be a power of two, got {alignment}")
    return alignment


def _tensor_infos(c: _Cursor, n_tensors: int, nbytes: array[int]) -> list[TensorInfo]:
    """The tensor infos, each checked as gguf.cpp checks it, in its order; their sizes go to ``nbytes``."""
    c.check_count(n_tensors, MIN_TENSOR_INFO, "tensor count")
    infos: list[TensorInfo] = []
    names: set[str] = set()  # the names kept anyway; the odd non-UTF-8 one is compared by its bytes
    odd_names: set[bytes] = set()
    for i in range(n_tensors):
        c.after = (n_tensors - i - 1) * MIN_TENSOR_INFO
        raw = c.string(f"tensor #{i} name")
        if len(raw) >= GGML_MAX_NAME:
            raise GGUFError(
                f"tensor #{i}'s name is {len(raw)} bytes long; llama.cpp allows at most {GGML_MAX_NAME - 1} "
                f"('{_shown(raw)}')"
            )
        try:
            name = raw.decode("utf-8")
            seen = name in names
            if not seen:
                names.add(name)
        except UnicodeDecodeError:
            name = raw.decode("utf-8", errors="replace")
            seen = raw in odd_names
            if not seen:
                odd_names.add(raw)
        if seen:
            raise GGUFError(
                f"tensor name '{_shown(raw)}' appears twice (tensor #{i}); llama.cpp refuses duplicate names"
            )
        n_dims = c.unpack("I", f"tensor {name} dimensions")
        if n_dims > GGML_MAX_DIMS:
            raise GGUFError(f"tensor '{_shown(name)}' has {n_dims:,} dimensions; ggml allows at most {GGML_MAX_DIMS}")
        c.need(8 * n_dims, f"tensor {name} shape")
        shape = struct.unpack_from(f"{c.bo}{n_dims}q", c.buf, c.pos)
        c.pos += 8 * n_dims
        for j, d in enumerate(shape):
            if d < 0:
                raise GGUFError(
                    f"tensor '{_shown(name)}' has a negative size {d:,} in dimension {j} (read unsigned: {d + 2**64:,})"
                )
        ne = list(shape) + [1] * (GGML_MAX_DIMS - n_dims)
        n = ne[0]
        for d in ne[1:]:  # gguf.cpp's test: 0 and 1 cannot overflow
            if d > 1 and INT64_MAX // d < n:
                raise GGUFError(
                    f"tensor '{_shown(name)}' of shape {shape} has more elements than a 64-bit count "
                    f"holds ({INT64_MAX:,})"
                )
            n *= d
        ttype = c.unpack("i", f"tensor {name} type")
        if not 0 <= ttype < GGML_TYPE_COUNT:
            raise GGUFError(
                f"tensor '{_shown(name)}' has unknown ggml type {ttype} (llama.cpp knows 0 to {GGML_TYPE_COUNT - 1})"
            )
        tr = TYPE_TRAITS[ttype]
        if tr.blck_size == 0:
            raise GGUFError(
                f"tensor '{_shown(name)}' has ggml type {ttype}, which llama.cpp no longer supports ({tr.name})"
            )
        if ne[0] % tr.blck_size:
            raise GGUFError(
                f"tensor '{_shown(name)}' of type {tr.name} has rows of {ne[0]:,} elements, "
                f"not a multiple of its block size {tr.blck_size}"
            )
        if n // tr.blck_size > UINT64_MAX // tr.type_size:
            raise GGUFError(
                f"tensor '{_shown(name)}' of shape {shape} and type {tr.name} needs more bytes than a 64-bit size holds"
            )
        offset = c.unpack("Q", f"tensor {name} offset")
        infos.append(TensorInfo(name, shape, ttype, offset))
        nbytes.append(_ggml_nbytes(ne, tr))
    c.after = 0
    return infos


def _check_offsets(infos: list[TensorInfo], sizes: array[int], alignment: int) -> int:
    """gguf.cpp's layout rule: each tensor's data follows the last one's, padded to the alignment.
    Returns where the last tensor's data ends, from the start of the data section."""
    size = 0
    end = 0
    for t, t_nbytes in zip(infos, sizes, strict=True):
        if t.offset != size:
            raise GGUFError(
                f"tensor '{_shown(t.name)}' has data offset {t.offset:,}, expected {size:,} (each tensor's data "
                f"must follow the previous one's, padded to {alignment} bytes)"
            )
        if t_nbytes > UINT64_MAX - (alignment - 1):
            raise GGUFError(
                f"tensor '{_shown(t.name)}' takes {t_nbytes:,} bytes, too many to pad to {alignment} bytes "
                "in a 64-bit size"
            )
        padded = (t_nbytes + alignment - 1) & ~(alignment - 1)
        if UINT64_MAX - size < padded:
            raise GGUFError(
                f"tensor '{_shown(t.name)}': the tensors' data adds up to more bytes than a 64-bit size holds"
            )
        end = size + t_nbytes
        size += padded
    return end


__all__ = ["ArrayRef", "GGUFError", "GGUFTruncated", "Header", "SourceError", "TensorInfo", "read_header"]
