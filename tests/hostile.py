"""Hostile GGUF headers (cost attacks), shared by the tests of the header reader and of uploads, and the benchmark."""

from __future__ import annotations

import struct
from pathlib import Path

NESTED_COUNT = 5_592_400  # arrays of (empty) arrays: 12 bytes each, 64 MiB when present
SPARSE_SIZE = 256 * 1024 * 1024


def _key(name: bytes) -> bytes:
    return struct.pack("<Q", len(name)) + name


def nested_arrays_body(count: int = NESTED_COUNT) -> bytes:
    """The 49-byte POST body: one key whose value is an ARRAY of ``count`` ARRAYs, nothing after it."""
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _key(b"k") + struct.pack("<IIQ", 9, 9, count)


def string_array_body(count: int) -> bytes:
    """One key holding an array of ``count`` strings, none of them sent."""
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _key(b"k") + struct.pack("<IIQ", 9, 8, count)


def nested_arrays_file(path: Path, count: int = NESTED_COUNT) -> Path:
    """The nested-array header with all its elements present (each an empty u8 array)."""
    with open(path, "wb") as f:
        f.write(nested_arrays_body(count))
        f.write(struct.pack("<IQ", 0, 0) * count)
    return path


def sparse(path: Path, head: bytes, size: int = SPARSE_SIZE) -> Path:
    """``head`` followed by zeros up to ``size`` bytes, as a sparse file (no disk used for the zeros)."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def huge_string_array(path: Path, size: int = SPARSE_SIZE) -> Path:
    """A sparse file whose one key is an array of as many empty strings as its zeros can hold."""
    count = (size - len(string_array_body(0))) // 8
    return sparse(path, string_array_body(count), size)


def many_keys(path: Path, n: int) -> Path:
    """``n`` distinct keys, each a u8: 8 + 8 + 4 + 1 = 21 bytes a key."""
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n))
        f.write(b"".join(_key(b"k%07d" % i) + struct.pack("<IB", 0, 1) for i in range(n)))
    return path


def many_small_arrays(path: Path, n: int) -> Path:
    """``n`` keys each holding a 64-element u8 array (decoded to lists up to the decode budget)."""
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n))
        f.write(b"".join(_key(b"a%07d" % i) + struct.pack("<IIQ", 9, 0, 64) + bytes(64) for i in range(n)))
    return path


def many_tensors(path: Path, n: int) -> Path:
    """``n`` one-element f32 tensors with 1-byte names (25 bytes each), data present."""
    infos = b"".join(_key(bytes([65 + i % 26]) + b"%d" % i) + struct.pack("<IqiQ", 1, 1, 0, 32 * i) for i in range(n))
    head = b"GGUF" + struct.pack("<IQQ", 3, n, 0) + infos
    with open(path, "wb") as f:
        f.write(head + bytes(-len(head) % 32 + 32 * n))
    return path


TINY_TOKENS_SIZE = 16 * 1024 * 1024  # the public header cap: the most an anonymous visitor may send


def tiny_tokens_header(
    size: int = TINY_TOKENS_SIZE, big_endian: bool = False, texts: tuple[bytes, ...] = (b"", b"a", b"", b"b\0c")
) -> bytes:
    """A ``size``-byte header that is one vocabulary of tiny tokens (``texts`` repeated): about two
    million tokens in 16 MiB, each 8-12 bytes, so per-token work dominates."""
    bo = ">" if big_endian else "<"

    def s(b: bytes) -> bytes:
        return struct.pack(bo + "Q", len(b)) + b

    head = (
        b"GGUF"
        + struct.pack(bo + "IQQ", 3, 0, 2)
        + s(b"tokenizer.ggml.model")
        + struct.pack(bo + "I", 8)
        + s(b"gpt2")
        + s(b"tokenizer.ggml.tokens")
        + struct.pack(bo + "II", 9, 8)
    )
    block = b"".join(s(t) for t in texts)
    n = (size - len(head) - 8) // len(block)
    return head + struct.pack(bo + "Q", n * len(texts)) + block * n


def tensor_file(path: Path, *tensors: tuple[bytes, list[int], int, int]) -> Path:
    """A header of no keys and ``tensors`` (name, dims, type, offset), as they are given, and 64 bytes of data."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 0)
    for name, dims, ttype, offset in tensors:
        out += struct.pack("<Q", len(name)) + name + struct.pack(f"<I{len(dims)}QiQ", len(dims), *dims, ttype, offset)
    path.write_bytes(out + bytes(-len(out) % 32 + 64))
    return path
