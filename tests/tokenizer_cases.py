"""Synthetic files for the tokenizer values and pair rules, one variant per default and rule: specreg's
checks (tests/inspector/test_llama_rules.py) and the real libllama (tests/inspector/test_llama_agrees.py) read the
same files."""

from __future__ import annotations

from pathlib import Path

from tests.ggufgen import vocab, write_gguf

# name → (writer kwargs, expected effective (add_bos, add_eos, bos, eos))
SINGLE = {
    "bpe_defaults": (dict(), (False, False, 11, 11)),
    "bpe_llama3_adds_bos": (dict(pre="llama-bpe"), (True, False, 11, 11)),
    "bpe_tekken_adds_bos": (dict(pre="tekken"), (True, False, 11, 11)),
    "bpe_chatglm_has_no_bos": (dict(pre="chatglm-bpe"), (False, False, -1, 11)),
    "bpe_stored_values_win": (dict(pre="llama-bpe", add_bos=False, add_eos=True, bos=7, eos=8), (False, True, 7, 8)),
    "bpe_stored_id_out_of_range_keeps_default": (dict(bos=5000, eos=9999), (False, False, 11, 11)),
    "bpe_small_vocab_disables_default": (dict(tokens=vocab(10)), (False, False, -1, -1)),
    "spm_defaults": (dict(model="llama", pre="default"), (True, False, 1, 2)),
    "spm_stored_add_bos_false": (dict(model="llama", pre="default", add_bos=False), (False, False, 1, 2)),
    "ugm_defaults": (dict(model="t5", pre=None), (False, True, -1, 1)),
    "wpm_defaults": (dict(model="bert", pre=None, tokens=vocab(300)), (True, False, 101, -1)),
    "gemma4_forces_add_bos": (dict(model="gemma4", pre=None, add_bos=False, bos=2, eos=1), (True, False, 2, 1)),
}


def make(tmp_path: Path, name: str, **kw) -> Path:
    kw.setdefault("tokens", vocab(300))
    return write_gguf(tmp_path / f"{name}.gguf", **kw)


# name → (target kwargs, draft kwargs, failed rules, first mismatch id)
PAIRS = {
    "identical": (dict(), dict(), set(), None),
    "vocab_type": (dict(model="llama", pre="default"), dict(), {"vocab_type", "bos"}, None),
    "add_bos_differs": (dict(add_bos=True), dict(add_bos=False), {"bos"}, None),
    "bos_id_differs": (dict(add_bos=True, bos=1), dict(add_bos=True, bos=2), {"bos"}, None),
    "bos_id_differs_but_not_added": (dict(bos=1), dict(bos=2), set(), None),
    "eos_id_differs": (dict(add_eos=True, eos=2), dict(add_eos=True, eos=3), {"eos"}, None),
    "size_diff_128_allowed": (dict(tokens=vocab(428)), dict(tokens=vocab(300)), set(), None),
    "size_diff_129_refused": (dict(tokens=vocab(429)), dict(tokens=vocab(300)), {"vocab_size"}, None),
    "text_differs": (dict(tokens=vocab(300)), dict(tokens=vocab(150) + ["zz"] + vocab(300)[151:]), {"token_text"}, 150),
    "text_differs_below_5_ignored": (
        dict(tokens=vocab(300)),
        dict(tokens=["a", "b", "c", "d", "e"] + vocab(300)[5:]),
        set(),
        None,
    ),
    "raw_bytes_compared": (dict(tokens=vocab(300)), dict(tokens=vocab(299) + [b"\xff\xfe"]), {"token_text"}, 299),
    "three_problems": (
        dict(add_bos=True, tokens=vocab(600)),
        dict(add_bos=False, tokens=vocab(300, seed="u")),
        {"bos", "vocab_size", "token_text"},
        5,
    ),
}


def pair_files(tmp_path: Path, name: str) -> tuple[Path, Path]:
    tkw, dkw, _, _ = PAIRS[name]
    return make(tmp_path, f"{name}_t", **tkw), make(tmp_path, f"{name}_d", **dkw)
