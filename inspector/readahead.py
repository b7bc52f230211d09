"""How much of a GGUF header to fetch next when every request costs a round trip (HTTP Range reads).

A remote header is read in two bounded requests when the guess is good: the first ``FIRST_READ``
bytes (which the HTTP source fetches while it opens the file), then everything up to an estimate of
the header's end made from those bytes. An open-ended request closed early is no substitute: what
the server already pushed into socket buffers is sent anyway. The estimate walks what is there
(metadata count, tensor count, the tokenizer model, the token count and as many token lengths as
arrived) and fills in what is not from the shapes real vocabularies have: those of llama.cpp's
19 ``ggml-vocab-*.gguf`` files and the test models (``tests/bench/bench_inspector.py``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FIRST_READ = 64 * 1024  # holds the general.* keys and the first few thousand tokens of every file seen
MIN_FOLLOW_UP = 16 * 1024  # a re-estimate that was short: never ask for crumbs
MAX_PLANNED = 32 << 20  # counts are not yet validated when we plan: a hostile one must not buy a huge read
FOLLOW_UP_SLACK = 0.01  # of the bytes read: a third request means the file is unusual, so do not be short twice
MARGIN = 0.03  # added to the estimated (not yet seen) bytes: the price of a second guess is a third request
TENSOR_INFO = 72  # bytes per tensor info: name ("blk.12.ffn_down.weight") + dims + type + offset, ~62-66 seen
SMALL_KV = 64  # a metadata key with a scalar or short string value
TEMPLATE_ALLOWANCE = 4096  # an unseen tokenizer.chat_template (0.4-10 KB in real files)
# Tokenizer models whose files carry a float per token, and those that carry BPE merges.
WITH_SCORES = {"llama", "t5", "gemma4", "rwkv", "plamo2"}
WITH_MERGES = {"gpt2", "gemma4"}
_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes
_STRING, _ARRAY = 8, 9


def token_length_prior(n_tokens: int) -> float:
    """Average token text length (bytes) expected for a vocabulary of this size.

    Larger vocabularies hold longer pieces: ~7.0-7.5 bytes at 32-65k tokens (GPT-2, StarCoder,
    Llama 2), ~8.4-9.1 at 128-262k (Llama 3, Qwen2, Gemma); interpolated in log(size) between.
    """
    lo, hi = math.log(50_000), math.log(150_000)
    t = min(1.0, max(0.0, (math.log(max(n_tokens, 1)) - lo) / (hi - lo)))
    return 7.2 + 1.8 * t


def next_read(buf: bytes | bytearray, need_end: int) -> int:
    """Bytes to fetch after ``len(buf)`` so that (we expect) the whole header arrives, at least ``need_end``."""
    have = len(buf)
    if have == 0:
        return max(need_end, FIRST_READ)
    estimate = estimate_end(buf)
    if estimate is None:  # not a layout we can reason about: grow by a quarter, as a plain reader would
        return max(need_end - have, FIRST_READ, have // 4)
    known, guessed = estimate
    end = known + int(guessed * (1 + MARGIN))
    if have > FIRST_READ:
        end += int(have * FOLLOW_UP_SLACK)
    return max(need_end - have, min(end - have, MAX_PLANNED), MIN_FOLLOW_UP)


@dataclass
class _Walk:
    """What walking the metadata that arrived has learnt: where it stopped, and what the rest is scaled from."""

    buf: bytes | bytearray
    bo: str
    pos: int = 24
    guessed: float = 0.0
    done: int = 0  # metadata entries whose size is known or guessed
    seen: set[str] = field(default_factory=set)
    n_tokens: int = 0
    model: str = ""
    token_avg: float = 0.0
    token_marks: list[int] = field(default_factory=list)  # positions of every 1024th token, once all tokens are in
    token_end: int = 0

    def u32(self, at: int) -> int:
        return int(struct.unpack_from(self.bo + "I", self.buf, at)[0])

    def u64(self, at: int) -> int:
        return int(struct.unpack_from(self.bo + "Q", self.buf, at)[0])


class _Unreadable(Exception):
    """A value type no real GGUF header has (arrays of arrays, unknown types): no estimate."""


def estimate_end(buf: bytes | bytearray) -> tuple[int, int] | None:
    """(bytes known for certain, bytes guessed) from the start of ``buf`` to the header's end; None if unreadable."""
    if len(buf) < 24 or bytes(buf[:4]) != b"GGUF":
        return None
    bo = ">" if struct.unpack_from("<I", buf, 4)[0] & 0xFFFF == 0 else "<"
    n_tensors, n_kv = struct.unpack_from(bo + "QQ", buf, 8)
    w = _Walk(buf, bo)
    try:
        while w.done < n_kv and _entry(w):
            if w.pos > len(buf):  # this entry runs past what arrived: what follows is guessed
                break
    except _Unreadable:
        return None
    if not w.n_tokens and "tokenizer.ggml.tokens" not in w.seen:
        return None  # the vocabulary has not even started: nothing to scale from
    _guess_unseen(w, n_kv - w.done)
    w.guessed += n_tensors * TENSOR_INFO
    return w.pos, int(w.guessed)


def _entry(w: _Walk) -> bool:
    """Walk one metadata entry at ``w.pos``; False where its key or length has not arrived (nothing walked)."""
    buf, pos, limit = w.buf, w.pos, len(w.buf)
    if pos + 8 > limit:
        return False
    klen = w.u64(pos)
    if pos + 8 + klen + 4 > limit:
        return False
    key = bytes(buf[pos + 8 : pos + 8 + klen]).decode("utf-8", "replace")
    vtype = w.u32(pos + 8 + klen)
    vpos = pos + 12 + klen
    if vtype in _SCALARS:
        w.pos = vpos + _SCALARS[vtype]
    elif vtype == _STRING:
        if vpos + 8 > limit:
            return False
        n = w.u64(vpos)
        if key == "tokenizer.ggml.model" and vpos + 8 + n <= limit:
            w.model = bytes(buf[vpos + 8 : vpos + 8 + n]).decode("utf-8", "replace")
        w.pos = vpos + 8 + n
    elif vtype == _ARRAY:
        if vpos + 12 > limit:
            return False
        _array(w, key, vpos)
    else:
        raise _Unreadable
    w.seen.add(key)
    w.done += 1
    return True


def _array(w: _Walk, key: str, vpos: int) -> None:
    """Walk an array entry whose element type and count start at ``vpos``, guessing the strings not arrived."""
    etype, count = w.u32(vpos), w.u64(vpos + 4)
    w.pos = vpos + 12
    if etype in _SCALARS:
        w.pos += count * _SCALARS[etype]
        return
    if etype != _STRING:
        raise _Unreadable  # arrays of arrays: no real tokenizer has them
    w.pos, rest, avg, marks = _walk_strings(w.buf, w.pos, count, struct.Struct(w.bo + "Q").unpack_from)
    if key == "tokenizer.ggml.tokens":
        w.n_tokens = count
        if rest:  # the sample so far is the vocabulary's shortest pieces: trust it only past half
            avg = avg if count - rest >= count // 2 else max(avg, token_length_prior(count))
        else:
            w.token_marks, w.token_end = marks, w.pos
        w.token_avg = avg
    elif key == "tokenizer.ggml.merges" and rest:
        if w.token_marks and rest <= w.n_tokens:
            # BPE lists merges in rank order and tokens in the order merges made them, so the
            # merges not seen yet are the last tokens' texts with a space in each.
            avg = _tail_average(w.token_marks, w.token_end, w.n_tokens, rest) + 1
        elif count - rest < count // 2:
            avg = max(avg, (w.token_avg or token_length_prior(w.n_tokens or count)) + 1)
    w.guessed += rest * (8 + avg)


def _guess_unseen(w: _Walk, unseen: int) -> None:
    """Add the bytes guessed for the ``unseen`` metadata entries not reached: the vocabulary-sized arrays a tokenizer
    of this model has and that were not seen, then small entries (and a chat template where none was seen)."""
    if unseen > 0 and w.n_tokens:
        big: list[tuple[str, float]] = [("tokenizer.ggml.token_type", 4 * w.n_tokens)]
        if w.model in WITH_SCORES:
            big.append(("tokenizer.ggml.scores", 4 * w.n_tokens))
        if w.model in WITH_MERGES:
            avg = (w.token_avg or token_length_prior(w.n_tokens)) + 1  # a merge "a b" is its token plus a space
            big.append(("tokenizer.ggml.merges", max(w.n_tokens - 256, 0) * (8 + avg)))
        for key, size in big:
            if key not in w.seen and unseen > 0:
                w.guessed += size + 48
                unseen -= 1
    if unseen > 0:
        w.guessed += unseen * SMALL_KV + (TEMPLATE_ALLOWANCE if "tokenizer.chat_template" not in w.seen else 0)


def _walk_strings(
    buf: bytes | bytearray, pos: int, count: int, u64: Callable[[bytes | bytearray, int], tuple[Any, ...]]
) -> tuple[int, int, float, list[int]]:
    """Follow length prefixes as far as ``buf`` goes: (position reached, elements left, average length,
    the position of every 1024th element).

    The average is of the later half of the elements seen (the best guess for those not seen yet:
    a BPE vocabulary lists its short pieces first).
    """
    limit, i = len(buf) - 8, 0
    marks = [pos]  # the position of every 1024th element, to find the midpoint afterwards
    while i < count and pos <= limit:
        pos += 8 + u64(buf, pos)[0]
        i += 1
        if not i & 1023:
            marks.append(pos)
    if i == 0:
        return pos, count, 0.0, marks
    mid = (i // 2) >> 10
    n_later = i - (mid << 10)
    return pos, count - i, (pos - marks[mid]) / n_later - 8, marks


def _tail_average(marks: list[int], end: int, count: int, tail: int) -> float:
    """Average text length of the last ``tail`` strings of an array walked whole (to 1024-element precision)."""
    k = (count - tail) >> 10
    n = count - (k << 10)
    return (end - marks[k]) / n - 8
