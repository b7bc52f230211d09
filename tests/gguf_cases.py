"""Malformed and valid GGUF headers covering every refusal of gguf.cpp (build 11434), written byte by byte.

``HANDCRAFTED`` mirrors the 34 kinds of llama.cpp's tests/test-gguf.cpp (``handcrafted_file_type``)
and how ``get_handcrafted_file`` writes them, with Python's random generator in place of mt19937;
``EXTRA`` adds the refusals (and near misses that must be accepted) that test-gguf.cpp does not
write. tests/inspector/test_gguf_agrees.py gives every file to llama.cpp and to specreg.
"""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path

from inspector.ggml_types import GGML_MAX_DIMS, GGML_TYPE_COUNT, TYPE_TRAITS

GGUF_VERSION = 3
ALIGN = 32
# gguf_type sizes; 0 for string and array (gguf.cpp's GGUF_TYPE_SIZE)
GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 0, 9: 0, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32, INT32 = 8, 9, 4, 5
I8, I64, F32, Q4_0 = 24, 27, 0, 2

HANDCRAFTED = [
    "HEADER_BAD_MAGIC",
    "HEADER_BAD_VERSION_0",
    "HEADER_BAD_VERSION_1",
    "HEADER_BAD_VERSION_FUTURE",
    "HEADER_BAD_N_TENSORS",
    "HEADER_BAD_N_KV",
    "HEADER_EMPTY",
    "KV_BAD_KEY_SIZE",
    "KV_EMPTY_KEY",
    "KV_BAD_TYPE",
    "KV_DUPLICATE_KEY",
    "KV_BAD_ALIGN",
    "KV_WRONG_TYPE_ALIGN",
    "KV_SUCCESS",
    "TENSORS_BAD_NAME_SIZE",
    "TENSORS_BAD_N_DIMS",
    "TENSORS_BAD_SHAPE",
    "TENSORS_ZERO_DIM",
    "TENSORS_NE_TOO_BIG",
    "TENSORS_NBYTES_TOO_BIG",
    "TENSORS_NBYTES_PAD_WRAP",
    "TENSORS_BAD_TYPE",
    "TENSORS_BAD_OFFSET",
    "TENSORS_DUPLICATE_NAME",
    "TENSORS_BAD_ALIGN",
    "TENSORS_INCONSISTENT_ALIGN",
    "TENSORS_SUCCESS",
    "TENSORS_CUSTOM_ALIGN",
    "DATA_NOT_ENOUGH_DATA",
    "DATA_BAD_ALIGN",
    "DATA_INCONSISTENT_ALIGN",
    "DATA_MEM_SIZE_OVERFLOW",
    "DATA_SUCCESS",
    "DATA_CUSTOM_ALIGN",
]


def _has(kind: str, part: str) -> bool:
    order = ["HEADER", "KV", "TENSORS", "DATA"]
    return order.index(kind.split("_")[0]) >= order.index(part)


def _expect_success(kind: str) -> bool:
    """test-gguf.cpp's expect_context_not_null: which kinds it writes as valid files."""
    return kind == "TENSORS_ZERO_DIM" or kind.endswith(("_EMPTY", "_SUCCESS", "_CUSTOM_ALIGN"))


def _tensor_configs(rng: random.Random) -> list[tuple[int, list[int]]]:
    out = []
    for _ in range(100):
        t = rng.randrange(GGML_TYPE_COUNT)
        if TYPE_TRAITS[t].type_size == 0:
            continue
        shape = [1] * GGML_MAX_DIMS
        shape[0] = (1 + rng.randrange(10)) * TYPE_TRAITS[t].blck_size
        for i in range(1, 1 + rng.randrange(GGML_MAX_DIMS)):
            shape[i] = 1 + rng.randrange(10)
        out.append((t, shape))
    return out


def _kv_types(rng: random.Random) -> list[tuple[int, int]]:
    out = []
    for _ in range(100):
        t = rng.randrange(13)
        if t == ARRAY:
            inner = rng.randrange(13)
            if inner != ARRAY:
                out.append((t, inner))
            continue
        out.append((t, -1))
    rng.shuffle(out)
    return out


def _pad(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _row_size(t: int, ne: int) -> int:
    tr = TYPE_TRAITS[t]
    return tr.type_size * ne // tr.blck_size


def _string(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def handcrafted(kind: str, seed: int) -> bytes:
    """The bytes test-gguf.cpp's get_handcrafted_file writes for ``kind``, with Python's generator."""
    rng = random.Random(seed)
    out = bytearray(b"FUGG" if kind == "HEADER_BAD_MAGIC" else b"GGUF")
    version = {"HEADER_BAD_VERSION_0": 0, "HEADER_BAD_VERSION_1": 1, "HEADER_BAD_VERSION_FUTURE": GGUF_VERSION + 1}
    out += struct.pack("<I", version.get(kind, GGUF_VERSION))
    configs = _tensor_configs(rng) if _has(kind, "TENSORS") else []
    if kind == "DATA_MEM_SIZE_OVERFLOW":
        configs = [(I8, [0x7FFFFFFFFFFFFFC0, 1, 1, 1])] * 2
    if kind == "TENSORS_NBYTES_PAD_WRAP":
        configs = [(F32, [4, 2**30 - 1, 2**30 + 1, 1])]  # ggml_nbytes = 2^64 - 16: padding wraps to 0
    out += struct.pack("<Q", 2**64 - 1 if kind == "HEADER_BAD_N_TENSORS" else len(configs))
    kvs = _kv_types(rng) if _has(kind, "KV") else []
    align_kinds = (
        "KV_BAD_ALIGN",
        "KV_WRONG_TYPE_ALIGN",
        "TENSORS_BAD_ALIGN",
        "TENSORS_CUSTOM_ALIGN",
        "DATA_BAD_ALIGN",
        "DATA_CUSTOM_ALIGN",
    )
    n_kv = len(kvs) + (kind in align_kinds)
    out += struct.pack("<Q", 2**64 - 1 if kind == "HEADER_BAD_N_KV" else n_kv)
    alignment = ALIGN
    if not _has(kind, "KV"):
        return bytes(out + bytes(-len(out) % alignment))
    for i, (t, t_arr) in enumerate(kvs):
        if kind == "KV_BAD_TYPE":
            t = t_arr = 13
        key = b"" if kind == "KV_EMPTY_KEY" else f"my_key_{i // 2 if kind == 'KV_DUPLICATE_KEY' else i}".encode()
        out += struct.pack("<Q", 2**64 - 1 if kind == "KV_BAD_KEY_SIZE" else len(key)) + key
        out += struct.pack("<i", t)
        data = [rng.getrandbits(32) for _ in range(16)]
        if STRING in (t, t_arr):
            data = [d | 0x01010101 for d in data]
        blob = struct.pack("<16I", *data)
        if t == STRING:
            n = rng.randrange(64)
            out += struct.pack("<Q", n) + blob[:n]
        elif t == ARRAY:
            out += struct.pack("<i", t_arr)
            if t_arr == STRING:
                nstr = rng.randrange(17)
                out += struct.pack("<Q", nstr)
                for j in range(nstr):
                    out += _string(blob[4 * j : 4 * j + rng.randrange(5)])
            else:
                n = rng.randrange(64) // GGUF_SIZES[t_arr]
                out += struct.pack("<Q", n) + blob[: n * GGUF_SIZES[t_arr]]
        else:
            out += blob[: 1 if kind == "KV_BAD_TYPE" else GGUF_SIZES[t]]
    if kind in align_kinds:
        alignment = 1 if _expect_success(kind) else 13
        out += _string(b"general.alignment") + struct.pack(
            "<iI", INT32 if kind == "KV_WRONG_TYPE_ALIGN" else UINT32, alignment
        )
    if not _has(kind, "TENSORS"):
        return bytes(out + bytes(-len(out) % alignment))
    if kind in ("TENSORS_INCONSISTENT_ALIGN", "DATA_INCONSISTENT_ALIGN"):
        alignment = 1
    offset = 0
    for i, (t, shape) in enumerate(configs):
        if kind == "TENSORS_NBYTES_TOO_BIG":
            t = I64
        name = "my_tensor" + ("" if kind == "TENSORS_DUPLICATE_NAME" else f"_{i}")
        if kind == "TENSORS_BAD_NAME_SIZE":
            name += "_with_a_very_long_name_which_is_longer_than_what_is_allowed_for_ggml_tensors"
        out += _string(name.encode())
        n_dims = 2 if kind in ("TENSORS_NE_TOO_BIG", "TENSORS_NBYTES_TOO_BIG") else 1
        for j in range(GGML_MAX_DIMS - 1, 0, -1):
            if shape[j] != 1:
                n_dims = j + 1
                break
        if kind == "TENSORS_ZERO_DIM":
            n_dims = 2
        out += struct.pack("<I", GGML_MAX_DIMS + 1 if kind == "TENSORS_BAD_N_DIMS" else n_dims)
        if kind == "TENSORS_BAD_SHAPE":
            dims = [-1] * n_dims
        elif kind == "TENSORS_ZERO_DIM":
            dims = [shape[0], 0]
        elif kind == "TENSORS_NE_TOO_BIG":
            dims = [4 * (2**31 - 1)] * n_dims
        elif kind == "TENSORS_NBYTES_TOO_BIG":
            big_ne = (2**64 - 1) // TYPE_TRAITS[t].type_size
            dims = [_pad(int(1.01 * math.pow(big_ne, 1.0 / n_dims)) + 1, TYPE_TRAITS[t].blck_size)] * n_dims
        else:
            dims = shape[:n_dims]
        out += struct.pack(f"<{len(dims)}q", *dims)
        out += struct.pack("<i", GGML_TYPE_COUNT if kind == "TENSORS_BAD_TYPE" else t)
        out += struct.pack("<Q", 2**64 - 1 if kind == "TENSORS_BAD_OFFSET" else offset)
        ne = 0 if kind == "TENSORS_ZERO_DIM" else math.prod(shape[:n_dims])
        offset += _pad(_row_size(t, ne), alignment)
    out += bytes(-len(out) % alignment)
    if _has(kind, "DATA"):
        n = offset - (kind == "DATA_NOT_ENOUGH_DATA")
        if kind == "DATA_MEM_SIZE_OVERFLOW":
            n = 32
        out += bytes(i % 256 for i in range(n))
    return bytes(out)


# --- refusals (and near misses) test-gguf.cpp does not write ----------------------------------


def _header(n_tensors: int, kvs: list[bytes], version: int = GGUF_VERSION) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, len(kvs)) + b"".join(kvs)


def kv(key: bytes, vtype: int, payload: bytes) -> bytes:
    return _string(key) + struct.pack("<i", vtype) + payload


def tensor(name: bytes, dims: list[int], ttype: int, offset: int) -> bytes:
    return _string(name) + struct.pack(f"<I{len(dims)}qiQ", len(dims), *dims, ttype, offset)


def _file(n_tensors: int, kvs: list[bytes], infos: list[bytes], data: int = 0, align: int = ALIGN) -> bytes:
    out = _header(n_tensors, kvs) + b"".join(infos)
    if n_tensors:
        out += bytes(-len(out) % align)
    return out + bytes(data)


NAME = kv(b"general.name", STRING, _string(b"x"))
F32_4x8 = 4 * 4 * 8  # bytes of a 4x8 f32 tensor


def extra(kind: str, seed: int) -> bytes:
    """One file of an ``EXTRA`` kind; ``seed`` varies sizes and names where the kind allows."""
    rng = random.Random(seed)
    n = 1 + rng.randrange(8)
    ok_tensor = [tensor(b"w", [4, 8], F32, 0)]
    cases = {
        "HEADER_TRUNCATED": lambda: _header(0, [])[: 4 + rng.randrange(20)],
        "HEADER_VERSION_2": lambda: _header(0, [NAME], version=2) + bytes(7),
        "KV_ARRAY_OF_ARRAYS": lambda: _file(
            0, [kv(b"a", ARRAY, struct.pack("<iQ", ARRAY, n) + struct.pack("<iQ", 0, 0) * n)], []
        ),
        "KV_ARRAY_BAD_TYPE": lambda: _file(
            0, [kv(b"a", ARRAY, struct.pack("<iQ", 13 + rng.randrange(100), 1) + bytes(8))], []
        ),
        "KV_ARRAY_OVER_LIMIT": lambda: _file(0, [kv(b"a", ARRAY, struct.pack("<iQ", 0, 2**30 + n))], []),
        "KV_STRING_ARRAY_PAST_END": lambda: _file(
            0, [kv(b"a", ARRAY, struct.pack("<iQ", STRING, 1000 + n) + _string(b"x"))], []
        ),
        "KV_STRING_OVER_LIMIT": lambda: _file(0, [kv(b"s", STRING, struct.pack("<Q", 2**30 + n))], []),
        "KV_STRING_PAST_END": lambda: _file(0, [kv(b"s", STRING, struct.pack("<Q", 100 + n) + b"abc")], []),
        "KV_VALUE_TRUNCATED": lambda: _header(0, [kv(b"u", 10, b"\1\2\3")]),
        "KV_NEGATIVE_TYPE": lambda: _file(0, [kv(b"k", -1 - rng.randrange(5), bytes(8))], []),
        "KV_NON_UTF8_KEY": lambda: _file(
            0, [kv(b"\xff\xfe" + bytes([n]), UINT32, bytes(4)), kv(b"\xff\xfe", UINT32, bytes(4))], []
        ),
        "KV_DUPLICATE_NON_UTF8_KEY": lambda: _file(0, [kv(b"\xff\xfe", UINT32, bytes(4))] * 2, []),
        "KV_BOOL_ODD_BYTE": lambda: _file(0, [kv(b"b", 7, bytes([2 + n]))], []),
        "KV_ALIGN_ZERO": lambda: _file(0, [kv(b"general.alignment", UINT32, struct.pack("<I", 0))], []),
        "KV_ALIGN_I32_32": lambda: _file(
            1, [kv(b"general.alignment", INT32, struct.pack("<i", 32))], ok_tensor, F32_4x8
        ),
        "KV_ALIGN_U64": lambda: _file(0, [kv(b"general.alignment", 10, struct.pack("<Q", 32))], []),
        "KV_ALIGN_64": lambda: _file(
            1, [kv(b"general.alignment", UINT32, struct.pack("<I", 64))], ok_tensor, F32_4x8, 64
        ),
        "TENSORS_NAME_63": lambda: _file(1, [], [tensor(b"n" * 63, [4, 8], F32, 0)], F32_4x8),
        "TENSORS_NAME_64": lambda: _file(1, [], [tensor(b"n" * (64 + n), [4, 8], F32, 0)], F32_4x8),
        "TENSORS_EMPTY_NAME": lambda: _file(1, [], [tensor(b"", [4, 8], F32, 0)], F32_4x8),
        "TENSORS_ZERO_DIMS": lambda: _file(1, [], [tensor(b"scalar", [], F32, 0)], 4),
        "TENSORS_FIVE_DIMS": lambda: _file(1, [], [tensor(b"t", [1, 1, 1, 1, 1], F32, 0)], 4),
        "TENSORS_NEGATIVE_LAST_DIM": lambda: _file(1, [], [tensor(b"t", [4, 2, -n], F32, 0)], 64),
        "TENSORS_MINUS_ONE_DIM": lambda: _file(1, [], [tensor(b"t", [4096, -1], F32, 0)], 64),
        "TENSORS_NEGATIVE_TYPE": lambda: _file(1, [], [tensor(b"t", [4, 8], -n, 0)], F32_4x8),
        "TENSORS_TYPE_43": lambda: _file(1, [], [tensor(b"t", [4, 8], GGML_TYPE_COUNT + rng.randrange(3), 0)], F32_4x8),
        "TENSORS_REMOVED_TYPE": lambda: _file(
            1, [], [tensor(b"t", [32, 8], rng.choice([4, 5, 31, 32, 33, 36, 37, 38]), 0)], 1024
        ),
        "TENSORS_ROW_NOT_BLOCK": lambda: _file(1, [], [tensor(b"t", [32 * n + 1, 2], Q4_0, 0)], 4096),
        # ne0 * 18 wraps in ggml_nbytes: llama.cpp takes the first tensor as 2^58 bytes, not 2^57 * 18
        "TENSORS_NBYTES_WRAP_IN_ROW": lambda: _file(
            2, [], [tensor(b"t", [2**62, 1], Q4_0, 0), tensor(b"u", [4], F32, 2**58)], 64
        ),
        "TENSORS_SIZES_SUM_PAST_64_BITS": lambda: _file(
            3,
            [],
            [
                tensor(b"a", [2**63 - 64], I8, 0),
                tensor(b"b", [2**63 - 64], I8, 2**63 - 64),
                tensor(b"c", [2**63 - 64], I8, 2**64 - 128),
            ],
            64,
        ),
        "TENSORS_OFFSETS_SWAPPED": lambda: _file(
            2, [], [tensor(b"a", [4, 8], F32, F32_4x8), tensor(b"b", [4, 8], F32, 0)], 2 * F32_4x8
        ),
        "TENSORS_OFFSET_MISALIGNED": lambda: _file(2, [], [tensor(b"a", [3], F32, 0), tensor(b"b", [3], F32, 12)], 64),
        "TENSORS_OFFSET_MAX": lambda: _file(1, [], [tensor(b"a", [4, 8], F32, 2**64 - 1)], F32_4x8),
        "TENSORS_DATA_UNREACHABLE": lambda: _file(
            1, [kv(b"general.alignment", UINT32, struct.pack("<I", 1 << 16))], [tensor(b"a", [4], F32, 0)], 0, 1
        ),
        "TENSORS_HEADER_TRUNCATED": lambda: _header(2, []) + ok_tensor[0] + tensor(b"v", [4, 8], F32, 128)[: 5 + n],
        "TENSORS_DATA_MISSING": lambda: _file(1, [NAME], ok_tensor, F32_4x8 - n),
        "TENSORS_DATA_EXACT_NO_PAD": lambda: _file(
            2, [], [tensor(b"a", [3], F32, 0), tensor(b"b", [3], F32, 32)], 32 + 12
        ),
        "TENSORS_DUPLICATE_NAME_FAR": lambda: _file(
            3, [], [tensor(b"a", [4], F32, 0), tensor(b"b", [4], F32, 32), tensor(b"a", [4], F32, 64)], 96
        ),
    }
    return cases[kind]()


EXTRA = [
    "HEADER_TRUNCATED",
    "HEADER_VERSION_2",
    "KV_ARRAY_OF_ARRAYS",
    "KV_ARRAY_BAD_TYPE",
    "KV_ARRAY_OVER_LIMIT",
    "KV_STRING_ARRAY_PAST_END",
    "KV_STRING_OVER_LIMIT",
    "KV_STRING_PAST_END",
    "KV_VALUE_TRUNCATED",
    "KV_NEGATIVE_TYPE",
    "KV_NON_UTF8_KEY",
    "KV_DUPLICATE_NON_UTF8_KEY",
    "KV_BOOL_ODD_BYTE",
    "KV_ALIGN_ZERO",
    "KV_ALIGN_I32_32",
    "KV_ALIGN_U64",
    "KV_ALIGN_64",
    "TENSORS_NAME_63",
    "TENSORS_NAME_64",
    "TENSORS_EMPTY_NAME",
    "TENSORS_ZERO_DIMS",
    "TENSORS_FIVE_DIMS",
    "TENSORS_NEGATIVE_LAST_DIM",
    "TENSORS_MINUS_ONE_DIM",
    "TENSORS_NEGATIVE_TYPE",
    "TENSORS_TYPE_43",
    "TENSORS_REMOVED_TYPE",
    "TENSORS_ROW_NOT_BLOCK",
    "TENSORS_NBYTES_WRAP_IN_ROW",
    "TENSORS_SIZES_SUM_PAST_64_BITS",
    "TENSORS_OFFSETS_SWAPPED",
    "TENSORS_OFFSET_MISALIGNED",
    "TENSORS_OFFSET_MAX",
    "TENSORS_DATA_UNREACHABLE",
    "TENSORS_HEADER_TRUNCATED",
    "TENSORS_DATA_MISSING",
    "TENSORS_DATA_EXACT_NO_PAD",
    "TENSORS_DUPLICATE_NAME_FAR",
]
SEEDS = range(5)


def write_all(folder: Path) -> list[Path]:
    """Every kind with every seed, as files named KIND-SEED.gguf."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for kinds, make in ((HANDCRAFTED, handcrafted), (EXTRA, extra)):
        for kind in kinds:
            for seed in SEEDS:
                p = folder / f"{kind}-{seed}.gguf"
                p.write_bytes(make(kind, seed))
                paths.append(p)
    return paths
