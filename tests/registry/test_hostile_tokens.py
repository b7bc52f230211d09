"""Hardening: one anonymous upload cost seconds and hundreds of MB.

A 16 MB big-endian header of two million tiny tokens posted to /local/inspect took 3.7 s and +290 MB
(a Python object per token to byte-swap the table); comparing two tables that differ after a NUL in
every token was quadratic. Each test reproduces the attack; the limits on uploads come last.
"""

from __future__ import annotations

import hashlib
import random
import struct
import tracemalloc

import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from inspector import tokens
from inspector.tokens import TokenTable, first_text_mismatch
from registry.access.rate_limits import RateLimited, check_upload, hit
from registry.models import RateCount
from registry.web.header_upload import inspect_prefix
from tests import hostile
from tests.budget import python_lines

# Work is counted in Python lines run, not in seconds: a loaded machine changes the seconds, never the count.
PER_TOKEN_LINES = 4.5  # reading a header walks its token array's length prefixes: 4 lines a token, the rest bounded
COMPARE_LINES = 50_000  # comparing two tables of ~2 million tokens: a few lines per slice (~10,000 used)


def _table_bytes(body: bytes) -> bytes:
    """The token array's elements in a ``hostile.tiny_tokens_header`` (everything after its count)."""
    key = b"tokenizer.ggml.tokens"
    return body[body.index(key) + len(key) + 4 + 4 + 8 :]


def _inspect(body: bytes):
    return inspect_prefix("tiny.gguf", body, len(body), len(body))


@pytest.mark.parametrize("big_endian", [False, True], ids=["little-endian", "big-endian"])
def test_a_16_mib_table_of_two_million_tiny_tokens_costs_one_python_step_per_token_and_4x_its_bytes(big_endian):
    body = hostile.tiny_tokens_header(big_endian=big_endian)
    _inspect(body)  # modules imported and set up once, outside the count
    with python_lines(int(PER_TOKEN_LINES * 2_000_000)) as lines:
        info = _inspect(body)
    # The walk of the length prefixes is the one loop per token (4 lines); byte-swapping, hashing and the
    # page's token texts add none. Was: 3.7 s big-endian, a Python object (and step) per token to byte-swap.
    assert lines.count <= PER_TOKEN_LINES * info.tokenizer.n_tokens, lines
    tracemalloc.start()
    try:
        _inspect(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 4 * len(body)  # was: +290 MB big-endian (17x)
    # identical results in either byte order: the fingerprint is that of the little-endian table
    little = _table_bytes(hostile.tiny_tokens_header())
    tok = info.tokenizer
    assert tok.n_tokens == 4 * (len(little) // 36) > 1_800_000
    assert tok.table_sha256 == hashlib.sha256(little).hexdigest()
    assert tok.vocab_key == _inspect(hostile.tiny_tokens_header()).tokenizer.vocab_key
    assert info.tokens.canonical_blob() == little


def test_the_upload_of_such_a_header_is_answered_in_time(client, db, settings):
    settings.SPECREG_ANON_CHECKS_PER_MINUTE = 100

    def post(body: bytes):
        return client.post(
            "/local/inspect",
            body,
            content_type="application/octet-stream",
            headers={"X-File-Name": "tiny.gguf", "X-File-Size": str(len(body))},
        )

    assert post(hostile.tiny_tokens_header(64 * 1024, big_endian=True)).status_code == 200  # imports, outside the count
    with python_lines(int(PER_TOKEN_LINES * 2_000_000)) as lines:
        r = post(hostile.tiny_tokens_header(big_endian=True))
    assert r.status_code == 200 and r.json()["info"]["tokenizer"]["n_tokens"] > 1_800_000
    # the view (inspection, partners, page fragment, counts): the header's walk and a bounded rest, no other
    # Python step per token
    assert lines.count <= PER_TOKEN_LINES * r.json()["info"]["tokenizer"]["n_tokens"], lines


def _table(texts: list[bytes], byteorder: str = "<") -> TokenTable:
    return TokenTable(b"".join(struct.pack(byteorder + "Q", len(t)) + t for t in texts), len(texts), byteorder)


def _repeated(texts: tuple[bytes, ...], times: int, byteorder: str = "<") -> TokenTable:
    block = b"".join(struct.pack(byteorder + "Q", len(t)) + t for t in texts)
    return TokenTable(block * times, len(texts) * times, byteorder)


def test_tables_that_differ_after_a_nul_in_every_token_compare_in_linear_time():
    # llama.cpp compares with strcmp: "x\0a" and "x\0b" are the same token. Each such token cost a compare
    # of every byte left, so 30,000 of them took minutes; now two million cost a few Python lines per slice.
    a, b = _repeated((b"x\0a",), 1_500_000), _repeated((b"x\0b",), 1_500_000)
    with python_lines(COMPARE_LINES) as lines:
        assert first_text_mismatch(a, b) is None
    assert lines.count <= COMPARE_LINES, lines  # a few per slice of the tables, none per token
    # the same after a real difference far in: found at its id
    texts_b = [b"x\0b"] * 1_500_000
    texts_b[1_234_567] = b"y"
    found = first_text_mismatch(a, _table(texts_b))
    assert (found.token_id, found.target, found.draft) == (1_234_567, b"x", b"y")


def test_tables_in_two_byte_orders_compare_without_a_step_per_token():
    texts = (b"", b"a", b"", b"b\0c")
    a, b = _repeated(texts, 465_000), _repeated(texts, 465_000, ">")
    with python_lines(COMPARE_LINES) as lines:
        assert first_text_mismatch(a, b) is None and first_text_mismatch(b, a) is None
    assert lines.count <= COMPARE_LINES, lines  # was: 4 s, a Python step per token (1.86 million of them)
    assert a.sha256 == b.sha256 and a.canonical_blob() == b.canonical_blob()


def _reference(a: TokenTable, b: TokenTable) -> tuple | None:
    """The rule token by token, as llama.cpp applies it."""
    for i in range(tokens.CHECK_START_ID, min(a.count, b.count)):
        if a.llama_text(i) != b.llama_text(i):
            return i, a.llama_text(i), b.llama_text(i)
    return None


@pytest.mark.parametrize("chunk", [16, 64, 1 << 20])
def test_the_vectorised_comparison_agrees_with_the_rule_token_by_token(monkeypatch, chunk):
    """Random tables of the texts that make the rule subtle (empty tokens, "[EMPTY_i]" spelled out, NULs),
    in both byte orders, with slices small enough that single long tokens and slice ends are crossed."""
    monkeypatch.setattr(tokens, "CHUNK_BYTES", chunk)
    rng = random.Random(23)
    alphabet = [b"", b"\0", b"a", b"a\0x", b"a\0y", b"[EMPTY_7]", b"[EMPTY_12]", b"[EMPTY_1", b"xyz" * 9, b"ab"]
    for _ in range(400):
        ta = [rng.choice(alphabet) for _ in range(rng.randint(0, 40))]
        tb = list(ta)
        for _ in range(rng.randint(0, 3)):
            if tb:
                tb[rng.randrange(len(tb))] = rng.choice(alphabet)
        tb = tb[: rng.randint(max(0, len(ta) - 3), len(ta))] + [rng.choice(alphabet) for _ in range(rng.randint(0, 3))]
        a, b = _table(ta, rng.choice("<>")), _table(tb, rng.choice("<>"))
        for x, y in ((a, b), (b, a)):
            found = first_text_mismatch(x, y)
            assert (None if found is None else (found.token_id, found.target, found.draft)) == _reference(x, y)
        assert a.canonical_blob() == _table(ta).blob and a.sha256 == hashlib.sha256(_table(ta).blob).hexdigest()


def test_a_stored_blob_that_does_not_fill_its_count_is_refused():
    blob = _table([b"ab", b"c"]).blob
    assert list(TokenTable(blob, 2).offsets) == [0, 10]
    for count, data in ((3, blob), (1, blob), (2, blob[:-1]), (2, struct.pack("<Q", 2**64 - 1) + bytes(8))):
        with pytest.raises(ValueError):
            TokenTable(data, count)


# --- limits on anonymous uploads ----------------------------------------------------------------


def _post(c: Client, body: bytes):
    return c.post(
        "/local/inspect",
        body,
        content_type="application/octet-stream",
        headers={"X-File-Name": "tiny.gguf", "X-File-Size": str(len(body))},
    )


@pytest.mark.db_service
def test_anonymous_uploads_are_limited_in_number_per_address(client, db, settings, still_clock):
    settings.SPECREG_ANON_CHECKS_PER_MINUTE = 100
    settings.SPECREG_UPLOADS_PER_MINUTE = 3
    body = hostile.tiny_tokens_header(size=20_000)
    assert [_post(client, body).status_code for _ in range(4)] == [200, 200, 200, 429]
    error = _post(client, body).json()["error"]
    assert error.startswith("too many uploads from this address: at most 3 a minute") and "\n" not in error
    assert _post(Client(REMOTE_ADDR="10.0.0.9"), body).status_code == 200  # another address: its own count
    user = Client()
    user.force_login(User.objects.create_user("ann", password="x" * 12))
    assert _post(user, body).status_code == 200  # signed-in users: the check limit only


@pytest.mark.db_service
def test_anonymous_uploads_are_weighed_per_address_and_hour(client, db, settings, still_clock):
    settings.SPECREG_ANON_CHECKS_PER_MINUTE = 100
    settings.SPECREG_UPLOADS_PER_MINUTE = 100
    settings.SPECREG_UPLOAD_BYTES_PER_HOUR = 1024 * 1024
    body = hostile.tiny_tokens_header(size=400_000)
    assert [_post(client, body).status_code for _ in range(3)] == [200, 200, 429]
    error = _post(client, body).json()["error"]
    assert error.startswith("too many header bytes from this address: at most 1 MiB an hour") and "\n" not in error
    # refused uploads are not counted: the hour holds the two that were read
    assert RateCount.objects.get(key="hour:upload-bytes:ip:127.0.0.1").count == 2 * -(-len(body) // 1024)
    assert _post(client, hostile.tiny_tokens_header(size=100_000)).status_code == 200  # what is left still fits


@pytest.mark.db_service
def test_an_hours_upload_bytes_outlive_the_minute_windows(db, settings):
    settings.SPECREG_UPLOADS_PER_MINUTE = 100
    settings.SPECREG_UPLOAD_BYTES_PER_HOUR = 1024 * 1024
    request = RequestFactory().post("/local/inspect", REMOTE_ADDR="10.1.2.3")
    start = 7200.0  # an hour starts here
    check_upload(request, 600 * 1024, now=start + 10)
    hit("check:ip:10.1.2.3", 5, now=start + 1000)  # a minute count's clean-up keeps the hour's bytes
    with pytest.raises(RateLimited, match="try again in 43 min"):
        check_upload(request, 600 * 1024, now=start + 1020)
    check_upload(request, 600 * 1024, now=start + 3600)  # the next hour
    assert set(RateCount.objects.filter(key__startswith="hour:").values_list("window", flat=True)) == {7200, 10800}
