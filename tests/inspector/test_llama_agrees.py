"""The real libllama, loading the synthetic and real files vocab-only, agrees with our values and verdicts.

llama.cpp's view comes from the compiled probe of tests.llama_probe, which calls llama.cpp's own
``common_speculative_are_compatible``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.compat import check_pair
from inspector.info import inspect_source
from inspector.llama_rules import VOCAB_TYPES
from tests.llama_probe import llama_cpp_view
from tests.models import model_path
from tests.tokenizer_cases import PAIRS, SINGLE, make, pair_files

pytestmark = pytest.mark.llama


def our_view(path: Path) -> dict:
    t = inspect_source(path).tokenizer
    return {
        "vocab_type": VOCAB_TYPES[t.model][1],
        "add_bos": t.add_bos,
        "add_eos": t.add_eos,
        "bos": t.bos_id,
        "eos": t.eos_id,
        "n_tokens": t.n_tokens,
    }


def test_llama_cpp_reaches_our_effective_values(tmp_path, probe):
    files = [make(tmp_path, name, **kw) for name, (kw, _) in SINGLE.items()]
    for path, seen in zip(files, llama_cpp_view(probe, *files), strict=True):
        assert seen["loaded"], path
        values = {k: v for k, v in seen.items() if k not in ("file", "loaded", "compatible_with_first")}
        assert values == our_view(path), path.name


@pytest.mark.parametrize("kw", [dict(pre="no-such-pre"), dict(merges=False)])
def test_llama_cpp_refuses_what_we_call_a_load_error(tmp_path, probe, kw):
    path = make(tmp_path, "x", **kw)
    assert inspect_source(path).tokenizer.load_error
    assert llama_cpp_view(probe, path) == [{"file": 1, "loaded": False}]


@pytest.mark.parametrize("name", PAIRS)
def test_llama_cpp_gives_our_verdict_on_synthetic_pairs(tmp_path, probe, name):
    t, d = pair_files(tmp_path, name)
    seen = llama_cpp_view(probe, t, d)[1]
    assert seen["compatible_with_first"] == check_pair(inspect_source(t), inspect_source(d)).llama_cpp_compatible


def test_llama_cpp_gives_our_verdict_on_the_real_models(probe):
    files = [model_path(k) for k in ("qwen15", "qwen05", "smollm2", "gemma3")]
    seen = llama_cpp_view(probe, *files)
    infos = [inspect_source(f) for f in files]
    verdicts = [check_pair(infos[0], d).llama_cpp_compatible for d in infos[1:]]
    assert verdicts == [s["compatible_with_first"] for s in seen[1:]] == [True, False, False]
    for view, path in zip(seen, files, strict=True):
        values = {k: v for k, v in view.items() if k not in ("file", "loaded", "compatible_with_first")}
        assert values == our_view(path)
