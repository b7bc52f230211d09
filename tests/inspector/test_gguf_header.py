"""The streaming header reader on real models, synthetic files of every shape, and hostile bytes."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from gguf import GGUFReader
from gguf import GGUFValueType as T

from inspector.gguf_header import read_header
from inspector.info import InspectError, inspect_source
from inspector.sources import FileSource
from tests.budget import python_lines
from tests.ggufgen import vocab, write_gguf

ALL_SCALARS = {
    "x.u8": (200, T.UINT8),
    "x.i8": (-100, T.INT8),
    "x.u16": (60000, T.UINT16),
    "x.i16": (-30000, T.INT16),
    "x.u32": (4_000_000_000, T.UINT32),
    "x.i32": (-2_000_000_000, T.INT32),
    "x.f32": (1.5, T.FLOAT32),
    "x.bool": (True, T.BOOL),
    "x.str": ("héllo", T.STRING),
    "x.u64": (2**63 + 5, T.UINT64),
    "x.i64": (-(2**62), T.INT64),
    "x.f64": (2.25, T.FLOAT64),
}
ARRAYS = {
    "a.u8": ([1, 2, 255], T.ARRAY),
    "a.i32": ([-1, 0, 7], T.ARRAY),
    "a.f32": ([0.5, 1.5], T.ARRAY),
    "a.bool": ([True, False], T.ARRAY),
    "a.str": (["x", "yy", ""], T.ARRAY),
    "a.big": (list(range(1000)), T.ARRAY),
}


def read(path):
    with FileSource.open(path) as src:
        return read_header(src)


def test_it_reads_the_real_smollm2_header(smollm2_path):
    info = inspect_source(smollm2_path)
    assert info.architecture == "llama" and info.file_type == "Q4_1"
    assert info.tokenizer.n_tokens == 49152 and info.tokenizer.model == "gpt2" and info.tokenizer.pre == "smollm"
    assert info.tokenizer.special["bos"].text == "<|im_start|>"
    assert info.parameter_count == 134_515_008 and info.n_tensors == 272
    assert info.header_size == 1_785_664 and info.file_size == 98_362_432
    assert info.context_length == 8192 and info.block_count == 30
    assert info.token_texts(3) == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def test_it_reads_gemma3_from_the_first_part_only(gemma3_header_path):
    info = inspect_source(gemma3_header_path)
    assert info.architecture == "gemma3" and info.tokenizer.vocab_type == "spm"
    assert info.tokenizer.n_tokens == 262_144 and info.header_size == 6_525_112
    assert info.tokenizer.bos_id == 2 and info.tokenizer.eos_id == 1
    # only the header and a bounded read-ahead were read, not the 64 MB part
    assert info.bytes_fetched < 1.25 * info.header_size


def test_every_value_type_matches_gguf_py(tmp_path):
    p = write_gguf(
        tmp_path / "all.gguf",
        tokens=vocab(100),
        kv={**ALL_SCALARS, **ARRAYS},
        tensors={"w": np.ones((3, 5), dtype=np.float32)},
    )
    ours = read(p).kv
    ref = GGUFReader(p)
    for key in {**ALL_SCALARS, **ARRAYS}:
        field = ref.fields[key]
        expected = field.contents()
        got = ours[key]
        if key == "a.big":
            assert got.count == 1000 and got.end - got.start == 1000 * 4  # int32 elements
        elif isinstance(expected, float):
            assert got == pytest.approx(expected)
        elif isinstance(expected, list) and expected and isinstance(expected[0], float):
            assert got == pytest.approx(expected)
        else:
            assert got == expected, key


def test_big_endian_files_read_the_same_as_little_endian(tmp_path):
    kv = {k: v for k, v in ALL_SCALARS.items()}
    little = inspect_source(
        write_gguf(tmp_path / "le.gguf", tokens=vocab(300), kv=kv, tensors={"w": np.ones((2, 4), dtype=np.float32)})
    )
    big = inspect_source(
        write_gguf(
            tmp_path / "be.gguf",
            tokens=vocab(300),
            kv=kv,
            big_endian=True,
            tensors={"w": np.ones((2, 4), dtype=np.float32)},
        )
    )
    assert big.byteorder == "big" and little.byteorder == "little"
    for key in kv:
        assert big.metadata[key] == little.metadata[key]
    assert big.token_texts(300) == little.token_texts(300)
    assert big.tokenizer.table_sha256 == little.tokenizer.table_sha256
    assert big.parameter_count == little.parameter_count == 8


def test_version_2_files_are_read(tmp_path):
    p = write_gguf(tmp_path / "v2.gguf", tokens=vocab(50))
    data = bytearray(p.read_bytes())
    data[4:8] = struct.pack("<I", 2)
    p.write_bytes(data)
    assert inspect_source(p).gguf_version == 2


def test_a_file_object_is_a_source(smollm2_path):
    head = smollm2_path.read_bytes()[:2_000_000]
    info = inspect_source(io.BytesIO(head))
    assert info.tokenizer.n_tokens == 49152


def test_split_files_sum_tensors_over_shards(tmp_path):
    write_gguf(
        tmp_path / "m-00001-of-00002.gguf",
        tokens=vocab(64),
        kv={"split.no": (0, T.UINT16), "split.count": (2, T.UINT16)},
        tensors={"a": np.ones((4, 4), dtype=np.float32)},
    )
    write_gguf(
        tmp_path / "m-00002-of-00002.gguf",
        tokens=None,
        model=None,
        pre=None,
        hparams=False,
        kv={"split.no": (1, T.UINT16), "split.count": (2, T.UINT16)},
        tensors={"b": np.ones((2, 8), dtype=np.float32), "c": np.ones(3, dtype=np.float32)},
    )
    info = inspect_source(str(tmp_path / "m-00001-of-00002.gguf"))
    assert info.split_count == 2 and info.n_tensors == 3 and info.parameter_count == 16 + 16 + 3
    assert info.tokenizer.n_tokens == 64


def test_a_missing_shard_is_a_clear_error(tmp_path):
    write_gguf(tmp_path / "m-00001-of-00003.gguf", tokens=vocab(64))
    with pytest.raises(InspectError, match="m-00002-of-00003.gguf: no such file"):
        inspect_source(str(tmp_path / "m-00001-of-00003.gguf"))


# --- hostile and broken input -------------------------------------------------------------


def _header(version=3, n_tensors=0, n_kv=1):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _key(name: bytes):
    return struct.pack("<Q", len(name)) + name


HOSTILE = {
    "wrong magic": (b"GGML" + bytes(40), "not a GGUF file"),
    "empty file": (b"", "not a GGUF file"),
    "version 1": (_header(1), "version 1 is not supported"),
    "unknown version": (_header(99), "unknown GGUF version 99"),
    "truncated after magic": (b"GGUF\x03\x00", "truncated"),
    "kv count larger than the file": (_header(n_kv=2**40), "claims 1,099,511,627,776 items"),
    "tensor count larger than the file": (_header(n_tensors=2**50, n_kv=0), "claims"),
    "key length larger than the file": (_header() + struct.pack("<Q", 2**62), "only"),
    "unknown value type": (_header() + _key(b"k") + struct.pack("<I", 99) + bytes(4), "unknown value type 99"),
    "string value longer than the file": (_header() + _key(b"k") + struct.pack("<IQ", 8, 2**29), "only"),
    "string value longer than llama.cpp's limit": (
        _header() + _key(b"k") + struct.pack("<IQ", 8, 2**40),
        "over llama.cpp's limit",
    ),
    "array count larger than the file": (_header() + _key(b"k") + struct.pack("<IIQ", 9, 4, 2**28), "claims"),
    "array count larger than llama.cpp's limit": (
        _header() + _key(b"k") + struct.pack("<IIQ", 9, 4, 2**61),
        "over llama.cpp's limit",
    ),
    "unknown array element type": (
        _header() + _key(b"k") + struct.pack("<IIQ", 9, 77, 1),
        "array of unknown value type 77",
    ),
    "arrays of arrays": (
        _header() + _key(b"k") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 10,
        "array of arrays",
    ),
    "tensor with too many dimensions": (
        _header(n_tensors=1, n_kv=0) + _key(b"t") + struct.pack("<I", 1000) + bytes(64),
        "dimensions",
    ),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_headers_fail_fast_with_one_line(tmp_path, name):
    data, message = HOSTILE[name]
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    tracemalloc.start()
    try:
        with python_lines(5_000) as lines, pytest.raises(InspectError) as exc:
            inspect_source(str(p))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # fast, counted: a few hundred Python lines and kilobytes, whatever count or length the header claims
    assert lines.count <= 5_000 and peak < 1_000_000, (lines, peak)
    text = str(exc.value)
    assert message in text and str(p) in text and "\n" not in text


def test_a_header_past_the_cap_is_refused(smollm2_path):
    with pytest.raises(InspectError, match="cap"):
        inspect_source(smollm2_path, max_header_bytes=1_000_000)


def test_truncated_real_header_names_the_offset(tmp_path, smollm2_path):
    p = tmp_path / "cut.gguf"
    p.write_bytes(smollm2_path.read_bytes()[:900_000])
    with pytest.raises(InspectError, match=r"token_type at offset 763542 .* \(truncated or corrupt\)"):
        inspect_source(str(p))


def run_cli(*args):
    return subprocess.run([sys.executable, "manage.py", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("make", ["directory", "missing", "hostile"])
def test_inspect_gguf_reports_bad_sources_in_one_line(tmp_path, make):
    if make == "directory":
        src = str(tmp_path)
    elif make == "missing":
        src = str(tmp_path / "nope.gguf")
    else:
        src = str(tmp_path / "bad.gguf")
        (tmp_path / "bad.gguf").write_bytes(_header(n_kv=2**40))
    r = run_cli("inspect_gguf", src)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and src in r.stderr and "Traceback" not in r.stderr


def test_inspect_gguf_prints_tokenizer_and_first_tokens(smollm2_path):
    r = run_cli("inspect_gguf", str(smollm2_path), "--tokens", "3")
    assert r.returncode == 0, r.stderr
    assert "49,152 tokens" in r.stdout and "'<|im_start|>'" in r.stdout and "add_bos       stored false" in r.stdout
    j = run_cli("inspect_gguf", str(smollm2_path), "--json", "--tokens", "2")
    import json

    d = json.loads(j.stdout)
    assert d["tokens"] == ["<|endoftext|>", "<|im_start|>"] and d["tokenizer"]["vocab_type"] == "bpe"


def test_data_complete_is_per_shard_and_check_pair_warns(tmp_path):
    from inspector.compat import check_pair

    write_gguf(
        tmp_path / "m-00001-of-00002.gguf",
        tokens=vocab(64),
        kv={"split.no": (0, T.UINT16), "split.count": (2, T.UINT16)},
        tensors={"a": np.ones((4, 4), dtype=np.float32)},
    )
    second = write_gguf(
        tmp_path / "m-00002-of-00002.gguf",
        tokens=None,
        model=None,
        pre=None,
        hparams=False,
        kv={"split.no": (1, T.UINT16), "split.count": (2, T.UINT16)},
        tensors={"b": np.ones((2, 8), dtype=np.float32)},
    )
    whole = inspect_source(str(tmp_path / "m-00001-of-00002.gguf"))
    assert whole.data_complete is True
    second.write_bytes(second.read_bytes()[:-1])  # an unfinished download of the second shard
    cut = inspect_source(str(tmp_path / "m-00001-of-00002.gguf"))
    assert cut.data_complete is False and cut.to_dict()["data_complete"] is False
    draft = inspect_source(write_gguf(tmp_path / "d.gguf", tokens=vocab(64)))
    assert draft.data_complete is True  # no tensors: nothing to miss
    ok, truncated = check_pair(whole, draft), check_pair(cut, draft)
    assert [w.code for w in truncated.warnings if w.code == "data_truncated"] == ["data_truncated"]
    assert "m-00001-of-00002.gguf" in next(w.message for w in truncated.warnings if w.code == "data_truncated")
    assert "data_truncated" not in {w.code for w in ok.warnings}
    assert truncated.checks == ok.checks and truncated.compatible == ok.compatible


def test_a_source_of_unknown_size_leaves_data_complete_open(smollm2_path):
    src = FileSource(io.BytesIO(smollm2_path.read_bytes()[:2_000_000]), "unsized")
    src.size = None  # as a server that gives no length
    header = read_header(src)
    assert header.tensors and header.data_complete is None


@pytest.mark.parametrize(
    "complete, words", [(True, "all inside the file"), (False, "ends before its tensor data"), (None, "not checked")]
)
def test_the_model_page_shows_whether_the_data_is_complete(tmp_path, complete, words):
    from django.template.loader import render_to_string

    from registry.web.pages import inspection_context

    weights = {"token_embd.weight": np.zeros((4, 8), np.float32)}  # a file with no tensors says so instead
    d = inspect_source(write_gguf(tmp_path / "m.gguf", tokens=vocab(64), tensors=weights)).to_dict()
    d["data_complete"] = complete
    html = render_to_string("registry/_inspection.html", inspection_context(d))
    assert words in html.split('id="data-complete"', 1)[1].split("</dd>", 1)[0]
