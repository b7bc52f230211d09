"""Cost attacks on the header reader: refused or read in time and memory that follow the bytes."""

from __future__ import annotations

import tracemalloc

import pytest

from inspector.gguf_header import DECODE_BUDGET, MAX_KEYS, ArrayRef, GGUFError, read_header
from inspector.info import INT64_MAX, InspectError, inspect_source
from inspector.sources import FileSource
from tests import hostile
from tests.budget import python_lines
from tests.hostile import tensor_file

# "At once", counted: the Python lines run and the memory taken, which no load changes. Refusing a hostile
# header takes a few hundred lines and well under a megabyte; reading its millions of elements took millions.
REFUSAL_LINES, REFUSAL_BYTES = 10_000, 2_000_000


def _read(path):
    with FileSource.open(path) as src:
        return read_header(src)


def _peak(fn):
    """(result or exception, peak bytes Python allocated while running ``fn``)."""
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - the caller asserts on it
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.django_db
def test_the_49_byte_nested_array_post_is_refused_at_once(client):
    body = hostile.nested_arrays_body()
    assert len(body) == 49

    def post(body: bytes):
        return client.post(
            "/local/inspect", body, content_type="application/octet-stream", headers={"X-File-Size": "1000000000000"}
        )

    assert post(hostile.nested_arrays_body(1)).status_code == 422  # the view's modules imported, outside the count
    with python_lines(10 * REFUSAL_LINES) as lines:  # a request: Django's own lines too (~19,000)
        answer, peak = _peak(lambda: post(body))
    assert answer.status_code == 422 and "array of arrays" in answer.json()["error"]
    assert lines.count <= 10 * REFUSAL_LINES and peak < 5 * REFUSAL_BYTES  # was: 438 MB, killed after 30 s


def test_a_sent_prefix_is_never_padded_with_zeros():
    """An array of 8M strings declared in 49 bytes: ask for the bytes, allocate nothing for them."""
    from registry.web.header_upload import NeedMore, inspect_prefix

    count = 8_000_000
    body = hostile.string_array_body(count)
    (more, peak) = _peak(lambda: inspect_prefix("x.gguf", body, 10**12))
    assert isinstance(more, NeedMore) and more.need >= len(body) + 8 * count
    assert peak < 1_000_000  # zero-padding walked and stored 8M elements (~130 MB)


def test_a_prefix_that_holds_the_header_needs_nothing_more(tmp_path):
    from registry.web.header_upload import inspect_prefix

    path = hostile.many_keys(tmp_path / "k.gguf", 100)
    data = path.read_bytes()
    info = inspect_prefix("k.gguf", data, 10 * len(data))
    assert len(info.metadata) == 100 and info.data_complete is True


@pytest.mark.parametrize("where", ["file", "sparse"])
def test_nested_arrays_are_refused_at_once(tmp_path, where):
    if where == "file":
        path = hostile.nested_arrays_file(tmp_path / "nested.gguf")  # was: 41 s, 642 MB
    else:
        path = hostile.sparse(tmp_path / "nested.gguf", hostile.nested_arrays_body())  # was: 4 min 37 s, 3.5 GB
    with python_lines(REFUSAL_LINES) as lines:
        refused, peak = _peak(lambda: inspect_source(path))
    assert isinstance(refused, InspectError)
    assert "'k' is an array of arrays, which llama.cpp cannot read" in str(refused)
    assert lines.count <= REFUSAL_LINES and peak < REFUSAL_BYTES  # 5.6 million elements, none of them walked


def test_a_huge_string_array_costs_at_most_four_times_its_bytes(tmp_path):
    path = hostile.huge_string_array(tmp_path / "strings.gguf", 16 * 1024 * 1024)
    header, peak = _peak(lambda: _read(path))
    assert (
        isinstance(header.kv["k"], ArrayRef)
        and header.kv["k"].count == (16 * 1024 * 1024 - len(hostile.string_array_body(0))) // 8
    )
    assert peak <= 4 * header.header_size


def test_keys_past_the_budget_are_refused_before_reading_them(tmp_path):
    path = hostile.many_keys(tmp_path / "keys.gguf", MAX_KEYS + 1)
    with pytest.raises(GGUFError, match=f"declares {MAX_KEYS + 1:,} metadata keys; specreg reads at most"):
        _read(path)
    assert len(_read(hostile.many_keys(tmp_path / "ok.gguf", 1000)).kv) == 1000


def test_small_arrays_past_the_decode_budget_stay_byte_ranges(tmp_path):
    n = DECODE_BUDGET // 64 + 10
    kv = _read(hostile.many_small_arrays(tmp_path / "arrays.gguf", n)).kv
    decoded = [v for v in kv.values() if isinstance(v, list)]
    assert len(decoded) == DECODE_BUDGET // 64 and all(
        isinstance(v, ArrayRef) for v in list(kv.values())[len(decoded) :]
    )


def test_a_shape_of_2_to_the_63_is_refused(tmp_path):
    path = tensor_file(tmp_path / "big.gguf", (b"t", [2**63, 1], 0, 0))
    with pytest.raises(InspectError, match="negative size"):
        inspect_source(path)


def test_stored_counts_fit_in_int64(tmp_path):
    """Two I8 tensors of 2^63 - 64 elements each: llama.cpp accepts the header (its data is missing)."""
    path = tensor_file(tmp_path / "two.gguf", (b"a", [2**63 - 64], 24, 0), (b"b", [2**63 - 64], 24, 2**63 - 64))
    info = inspect_source(path)
    assert info.parameter_count == INT64_MAX and info.data_complete is False
    assert info.file_size <= INT64_MAX and info.header_size <= INT64_MAX
