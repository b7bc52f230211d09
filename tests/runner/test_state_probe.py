"""specreg's state kinds and verdicts against llama.cpp's own decisions (the replay tool's probe mode).

The probe loads a pair with the pinned libllama/libcommon and reports what llama.cpp decides: each context's
common_context_can_seq_rm kind (the target's created with the method list's n_rs_seq, the draft's as
common_speculative_init_from_params creates it), common_speculative_are_compatible, and whether
common_speculative_init builds a speculator. The generated set crosses an attention model (the real Qwen2.5-Coder-0.5B),
a recurrent one (a tiny Mamba-2) and a hybrid one of an rs-rollback architecture (a tiny LFM2), all with Qwen2.5's
tokenizer, and SmolLM2 (another vocabulary), with single methods and a chain. The real headers of the test data
(without their weights) are checked vocabulary-only: the architecture's kind and are_compatible.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from inspector.compat import check_pair
from inspector.info import inspect_source
from inspector.llama_rules import state_kind
from runner.predict.tool import run_tool, tool
from tests.models import model_path
from tests.near_miss import rewrite
from tests.needs import missing
from tests.tinystate import lfm2, mamba2

pytestmark = pytest.mark.llama

# specreg's names for llama.cpp's common_context_seq_rm_type
KINDS = {"kv": "part", "checkpoints": "full", "rollback": "rs", "none": "no"}


@pytest.fixture(scope="module")
def exe():
    try:
        return tool(log=lambda s: None)
    except Exception as exc:  # noqa: BLE001 - the tool needs llama.cpp and a compiler: say which is missing
        missing(f"the replay tool: {exc}")


@pytest.fixture(scope="module")
def models() -> dict[str, Path]:
    return {"qwen2": model_path("qwen05"), "mamba2": mamba2(), "lfm2": lfm2(), "smollm2": model_path("smollm2")}


def probe(exe: Path, target: Path, draft: Path | None, method: str, tmp: Path, vocab: bool = False) -> dict:
    out = tmp / "probe.json"
    argv = [str(exe), "probe", str(out), "-m", str(target), "--spec-type", method, "-c", "512", "-t", "2"]
    if draft is not None:
        argv += ["-md", str(draft)]
    env = {**os.environ, "SPECREG_PROBE": "vocab"} if vocab else None
    run_tool(argv, 300, env)
    return json.loads(out.read_text())


def expected_kind(path: Path, role: str, method: str) -> str:
    info = inspect_source(str(path))
    return KINDS[state_kind(info.architecture, info.arch_kind, role, method)]


def test_a_target_alone_gets_the_kind_specreg_names_for_each_method(exe, models, tmp_path):
    for name, method in itertools.product(("qwen2", "mamba2", "lfm2"), ("ngram-mod", "draft-eagle3", "draft-mtp")):
        got = probe(exe, models[name], None, method, tmp_path)
        assert got["target"]["kind"] == expected_kind(models[name], "target", method), (name, method, got)
        # n-gram methods need no second model; a sidecar or MTP method without one builds no speculator
        assert got["speculator"] is (method == "ngram-mod"), (name, method, got)
    # the one bounded rollback of the set: an rs-rollback architecture asking snapshots for a sidecar method
    assert probe(exe, models["lfm2"], None, "draft-eagle3", tmp_path)["target"]["n_rs_seq"] > 0


@pytest.mark.parametrize("method", ["draft-simple", "ngram-mod,draft-simple"])
def test_every_pair_of_the_set_agrees_on_kinds_compatibility_and_the_speculator(exe, models, tmp_path, method):
    pairs = [(t, d) for t in ("qwen2", "mamba2", "lfm2") for d in ("qwen2", "mamba2", "lfm2", "smollm2") if t != d]
    for t, d in pairs:
        got = probe(exe, models[t], models[d], method, tmp_path)
        ours = check_pair(inspect_source(str(models[t])), inspect_source(str(models[d])))
        where = (t, d, method, got)
        assert got["target"]["kind"] == expected_kind(models[t], "target", method), where
        assert got["draft"]["kind"] == expected_kind(models[d], "draft", method), where
        assert (
            KINDS[ours.state["target"]] == got["target"]["kind"] and KINDS[ours.state["draft"]] == got["draft"]["kind"]
        )
        assert got["are_compatible"] is ours.llama_cpp_compatible, where
        # llama.cpp builds the speculator exactly when specreg calls the pair compatible
        assert got["speculator"] is ours.compatible, where
        if not ours.compatible:
            assert "vocab type must match" in got["error"], where


def test_real_headers_agree_vocabulary_only(exe, tmp_path):
    real = {
        "qwen05": model_path("qwen05", headers_only=True),
        "qwen15": model_path("qwen15", headers_only=True),
        "r1_7b": model_path("r1_7b_header", headers_only=True),
        "gemma3": model_path("gemma3", headers_only=True),
        "smollm2": model_path("smollm2"),
    }
    # their metadata alone: a first part's tensors lie past its end, which even a vocabulary-only load refuses
    headers = {k: rewrite(p, tmp_path / f"{k}.gguf", tensors=False) for k, p in real.items()}
    infos = {k: inspect_source(str(p)) for k, p in headers.items()}
    for a, b in itertools.permutations(sorted(headers), 2):
        got = probe(exe, headers[a], headers[b], "draft-simple", tmp_path, vocab=True)
        for side, name in (("target", a), ("draft", b)):
            kind = infos[name].arch_kind
            assert got[side]["recurrent"] is (kind == "recurrent"), (a, b, side, got)
            assert got[side]["hybrid"] is (kind == "hybrid"), (a, b, side, got)
            assert got[side]["diffusion"] is (kind == "diffusion"), (a, b, side, got)
        assert got["are_compatible"] is check_pair(infos[a], infos[b]).llama_cpp_compatible, (a, b, got)
