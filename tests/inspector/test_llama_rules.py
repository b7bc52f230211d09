"""Effective tokenizer values and pair rules on synthetic files — one variant per default and rule.

The same files (tests.tokenizer_cases) are loaded vocab-only by the real libllama in test_llama_agrees.py, which asserts
that llama.cpp reaches the values and verdicts asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from inspector.compat import check_pair
from inspector.info import inspect_source
from inspector.tokens import candidate_keys
from tests.ggufgen import vocab, write_gguf
from tests.tokenizer_cases import PAIRS, SINGLE, make, pair_files

# The six checks, in the order check_pair reports them (architecture first, then llama.cpp's five).
RULES = ["architecture", "vocab_type", "bos", "eos", "vocab_size", "token_text"]


@pytest.mark.parametrize("name", SINGLE)
def test_effective_tokenizer_values_follow_llama_cpp(tmp_path, name):
    kw, expected = SINGLE[name]
    t = inspect_source(make(tmp_path, name, **kw)).tokenizer
    assert (t.add_bos, t.add_eos, t.bos_id, t.eos_id) == expected
    assert t.load_error is None


def test_an_unknown_pre_tokenizer_is_a_load_error(tmp_path):
    t = inspect_source(make(tmp_path, "x", pre="no-such-pre")).tokenizer
    assert "unknown pre-tokenizer 'no-such-pre'" in t.load_error


@pytest.mark.parametrize("name", PAIRS)
def test_every_failing_rule_is_reported(tmp_path, name):
    t, d = pair_files(tmp_path, name)
    result = check_pair(inspect_source(t), inspect_source(d))
    _, _, failed, mismatch = PAIRS[name]
    assert [c.rule for c in result.checks] == RULES
    assert {c.rule for c in result.checks if c.ok is False} == failed
    assert result.compatible == (not failed) == result.llama_cpp_compatible
    assert result.failed_rule == next((r for r in RULES if r in failed), None)
    assert result.first_mismatch_token_id == mismatch
    for c in result.checks:
        assert c.detail.endswith(".") and len(c.detail) > 20


def test_the_mismatch_names_both_texts(tmp_path):
    t, d = pair_files(tmp_path, "raw_bytes_compared")
    result = check_pair(inspect_source(t), inspect_source(d))
    assert result.first_mismatch == {"target": "t299", "draft": "\\xff\\xfe"}
    assert "Token 299 differs" in result.checks[-1].detail


@pytest.mark.parametrize(
    "arch, kind, state, words",
    [
        ("mamba2", "recurrent", "checkpoints", "speculates with checkpoints"),
        ("qwen35", "hybrid", "checkpoints", "speculates with checkpoints"),
        ("jamba", "hybrid", "checkpoints", "partly accepted"),
        ("llada", "diffusion", "none", "does not speculate"),
        ("bert", "no-memory", "none", "no state to roll back"),
    ],
)
def test_a_stateful_target_speculates_with_its_cost_named_and_a_memoryless_one_does_not(
    tmp_path, arch, kind, state, words
):
    t = inspect_source(make(tmp_path, "t", arch=arch, hparams=False))
    d = inspect_source(make(tmp_path, "d"))
    assert t.arch_kind == kind
    result = check_pair(t, d)
    assert result.llama_cpp_compatible
    assert result.compatible is (state != "none")
    assert result.failed_rule == (None if state != "none" else "architecture")
    assert words in result.state["cost"] and result.checks[0].ok is (state != "none")
    assert (
        f"runs the pair with {state}" in result.checks[0].detail
        if state != "none"
        else words in result.checks[0].detail
    )
    assert result.state["kind"] == state and result.state["target"] == state and result.state["draft"] == "kv"


def test_a_hybrid_draft_is_checkpointed_and_usable(tmp_path):
    t = inspect_source(make(tmp_path, "t"))
    d = inspect_source(make(tmp_path, "d", arch="lfm2", hparams=False))
    assert d.speculative["type"] == "draft-simple" and "checkpoints" in d.speculative["explanation"]
    result = check_pair(t, d)
    assert result.compatible
    assert result.state == result.state | {"kind": "checkpoints", "target": "kv", "draft": "checkpoints"}
    assert "the draft's (lfm2) recurrent state" in result.state["cost"]


def test_a_file_without_a_token_table_cannot_be_evaluated(tmp_path):
    t = inspect_source(make(tmp_path, "t"))
    d = inspect_source(write_gguf(tmp_path / "d.gguf", tokens=None))
    result = check_pair(t, d)
    by_rule = {c.rule: c for c in result.checks}
    assert by_rule["vocab_size"].ok is None and by_rule["token_text"].ok is None
    assert "no token table" in by_rule["vocab_size"].detail
    assert result.failed_rule == "vocab_size" and not result.compatible


def test_warnings_name_the_default_bos_token(tmp_path):
    tokens = vocab(300)
    tokens[11] = ","
    weights = {"w": np.ones(16, dtype=np.float32)}
    t = inspect_source(make(tmp_path, "t", tokens=tokens, tensors=weights))
    d = inspect_source(make(tmp_path, "d", tokens=tokens, tensors=weights, chat_template="{{ messages }}"))
    codes = {w.code: w.message for w in check_pair(t, d).warnings}
    assert "11 ','" in codes["bos_default"]
    assert "draft_not_smaller" in codes and "chat_template_differs" in codes


def test_vocab_key_matches_qwen_sizes_128_apart(tmp_path, qwen05_header_path):
    base = inspect_source(qwen05_header_path)
    texts = [base.tokens.text(i) for i in range(base.tokens.count)]
    padded = inspect_source(make(tmp_path, "padded", tokens=texts + [f"<pad{i}>" for i in range(128)]))
    changed = list(texts)
    changed[100] = b"different"
    other = inspect_source(make(tmp_path, "changed", tokens=changed))
    assert padded.tokenizer.n_tokens == 152_064
    assert padded.tokenizer.vocab_key == base.tokenizer.vocab_key
    assert other.tokenizer.vocab_key != base.tokenizer.vocab_key
    assert check_pair(padded, base).compatible
    assert base.tokenizer.vocab_key in candidate_keys(padded.tokenizer.vocab_key)


def test_small_vocabularies_are_looked_up_by_type():
    assert candidate_keys("bpe:small") is None
    assert candidate_keys("bpe:abc") == ["bpe:abc", "bpe:small"]


def run_check_pair(*args):
    return subprocess.run(
        [sys.executable, "manage.py", "check_pair", *args], capture_output=True, text=True, timeout=120
    )


def test_check_pair_json_has_the_documented_shape(tmp_path):
    t, d = pair_files(tmp_path, "three_problems")
    r = run_check_pair(str(t), str(d), "--json")
    assert r.returncode == 1
    obj = json.loads(r.stdout)
    assert set(obj) == {
        "compatible",
        "llama_cpp_compatible",
        "rules_from",
        "checks",
        "failed_rule",
        "first_mismatch_token_id",
        "first_mismatch",
        "target",
        "draft",
        "warnings",
        "method",
        "state",
        "adaptable",
    }
    assert obj["rules_from"] == "b11434" and obj["failed_rule"] == "bos" and obj["method"] == "draft-simple"
    # three problems, one of them the vocabulary's size: more than adapt_draft may change
    assert obj["adaptable"] is None
    assert obj["state"] == {
        "kind": "kv",
        "target": "kv",
        "draft": "kv",
        "label": "KV cache",
        "cost": obj["state"]["cost"],
    }
    assert [c["rule"] for c in obj["checks"]] == RULES
    assert set(obj["target"]) == {
        "source",
        "architecture",
        "vocab_type",
        "n_vocab",
        "add_bos_stored",
        "add_bos",
        "add_eos_stored",
        "add_eos",
        "bos_id",
        "eos_id",
        "vocab_key",
    }
    assert obj["first_mismatch_token_id"] == 5


def test_check_pair_human_output_starts_with_the_verdict(tmp_path):
    t, d = pair_files(tmp_path, "identical")
    r = run_check_pair(str(t), str(d))
    assert r.returncode == 0 and r.stdout.startswith("Compatible: ")
    assert len(r.stdout.strip().splitlines()) >= 7


@pytest.mark.parametrize("args", [["only-one"], ["a.gguf", "b.gguf"], ["--json", "x", "y"]])
def test_check_pair_errors_are_one_line_with_exit_2(args):
    r = run_check_pair(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_check_pair_on_a_hybrid_target_exits_0_and_names_the_cost(tmp_path):
    t = make(tmp_path, "t", arch="qwen3next", hparams=False)
    d = make(tmp_path, "d")
    r = run_check_pair(str(t), str(d))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("Compatible:")
    assert (
        "  state: checkpoints (target checkpoints, draft kv): llama.cpp b11434 speculates with checkpoints" in r.stdout
    )
    assert (
        "[ok  ] architecture The target (qwen3next) is hybrid (attention + recurrent state): llama.cpp b11434 runs"
        in r.stdout
    )
    obj = json.loads(run_check_pair(str(t), str(d), "--json").stdout)
    assert obj["state"]["kind"] == "checkpoints" and obj["compatible"]
    alone = run_check_pair(str(t))
    assert alone.returncode == 0 and "ngram-mod" in alone.stdout and "(checkpoints)" in alone.stdout
    assert (
        "State: llama.cpp b11434 speculates with checkpoints: before each draft is verified it saves the target's "
        "(qwen3next) recurrent state" in alone.stdout
    )


def test_check_pair_on_a_memoryless_target_exits_1(tmp_path):
    r = run_check_pair(str(make(tmp_path, "t", arch="modern-bert", hparams=False)), str(make(tmp_path, "d")))
    assert r.returncode == 1 and "[FAIL] architecture" in r.stdout and "does not speculate" in r.stdout
