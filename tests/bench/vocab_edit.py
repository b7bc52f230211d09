"""Token tables edited in memory for the benchmark scripts: a family of its own from a real vocabulary (one token
changed below the key prefix), or a table padded by n tokens (bench_registry.py and bench_scale.py share these)."""

from __future__ import annotations

import struct

from inspector.tokens import TokenTable as Tokens


def element(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def replace_token(t: Tokens, i: int, text: bytes) -> Tokens:
    blob = t.blob
    start = t.offsets[i] - t.start  # offsets are positions in the header the table was read from
    end = t.offsets[i + 1] - t.start if i + 1 < t.count else len(blob)
    return Tokens(blob[:start] + element(text) + blob[end:], t.count)


def pad(t: Tokens, n: int) -> Tokens:
    return Tokens(t.blob + b"".join(element(f"<bench_pad_{i}>".encode()) for i in range(n)), t.count + n)
