"""specreg's copies of llama.cpp's tables agree with the pinned build's source."""

from __future__ import annotations

import re

import pytest

from inspector import llama_rules
from tests.llama_source import pinned_source


@pytest.fixture(scope="module")
def src():
    return pinned_source()


def _arch_names(src) -> dict[str, str]:
    text = (src / "src" / "llama-arch.cpp").read_text()
    return dict(re.findall(r'\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}', text))


def _switch_cases(src, function: str) -> set[str]:
    text = (src / "src" / "llama-arch.cpp").read_text()
    body = re.search(rf"bool {function}\(const llm_arch & arch\) \{{(.*?)\n\}}", text, re.S).group(1)
    true_part = body.split("return true;")[0]
    return set(re.findall(r"case (LLM_ARCH_\w+):", true_part))


@pytest.mark.parametrize(
    "function, ours",
    [
        ("llm_arch_is_recurrent", llama_rules.RECURRENT_ARCHS),
        ("llm_arch_is_hybrid", llama_rules.HYBRID_ARCHS),
        ("llm_arch_is_diffusion", llama_rules.DIFFUSION_ARCHS),
        ("llm_arch_supports_rs_rollback", llama_rules.RS_ROLLBACK_ARCHS),
    ],
)
def test_architecture_lists_match_llama_arch_cpp(src, function, ours):
    names = _arch_names(src)
    assert {names[c] for c in _switch_cases(src, function)} == set(ours)


def _load_body(src) -> str:
    text = (src / "src" / "llama-vocab.cpp").read_text()
    start = text.index("void llama_vocab::impl::load(")
    return text[start : text.index("const int token_idx", start)]


def test_known_pre_tokenizers_match_llama_vocab_cpp(src):
    body = _load_body(src)
    bpe = body[body.index("if (type == LLAMA_VOCAB_TYPE_BPE)") : body.index("} else if (type == LLAMA_VOCAB_TYPE_SPM)")]
    assert set(re.findall(r'tokenizer_pre == "([^"]+)"', bpe)) == llama_rules.KNOWN_BPE_PRE


def test_pre_tokenizers_that_add_bos_match(src):
    body = _load_body(src)
    branches = re.split(r"\} else if \(", body[body.index("if (tokenizer_pre.empty())") :])
    with_bos = set()
    without_bos = set()
    for branch in branches:
        names = set(re.findall(r'tokenizer_pre == "([^"]+)"', branch.split(")", 1)[0] + branch.split("{", 1)[0]))
        if "add_bos = true;" in branch.split("} else", 1)[0]:
            with_bos |= names
        if "special_bos_id = LLAMA_TOKEN_NULL;" in branch:
            without_bos |= names
    assert with_bos == llama_rules.BPE_PRE_ADD_BOS
    assert without_bos == llama_rules.BPE_PRE_NO_BOS


def test_default_special_ids_match(src):
    body = _load_body(src)
    found = {}
    for models, block in re.findall(
        r'if \((tokenizer_model == "[^{]+)\) \{(.*?)(?=\} else if|\n        \}\n)', body, re.S
    ):
        bos = re.search(r"special_bos_id\s*=\s*(\w+);", block)
        eos = re.search(r"special_eos_id\s*=\s*(\w+);", block)
        if not (bos and eos):
            continue
        ids = tuple(-1 if v == "LLAMA_TOKEN_NULL" else int(v) for v in (bos.group(1), eos.group(1)))
        for m in re.findall(r'tokenizer_model == "([^"]+)"', models):
            found[m] = ids
    assert found == llama_rules.DEFAULT_SPECIAL_IDS
