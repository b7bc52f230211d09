"""Speculation methods a file offers (inspector.speculative), on synthetic headers written with the gguf
package (no real MTP, EAGLE-3 or DFlash model is small enough to keep here) and on the real test models."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFValueType as T

from inspector.compat import check_pair
from inspector.info import inspect_source
from inspector.speculative import NGRAM_METHODS, SPEC_TYPES, draftless_methods
from tests.ggufgen import vocab, write_gguf
from tests.llama_source import pinned_source

ROOT = Path(__file__).resolve().parent.parent
W = np.zeros((4, 4), dtype=np.float32)
TOKENS = vocab(300)


def _file(tmp_path: Path, name: str, arch: str = "llama", *, tokens=TOKENS, kv=None, tensors=None,
          hparams: bool = True, width: int | None = None) -> Path:
    extra = dict(kv or {})
    if width is not None:
        extra[f"{arch}.embedding_length"] = (width, T.UINT32)
    return write_gguf(tmp_path / name, arch=arch, tokens=tokens, model="gpt2" if tokens else None,
                      pre="qwen2" if tokens else None, kv=extra, tensors=tensors or {"w": W},
                      hparams=hparams and width is None)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_the_method_names_are_the_pinned_builds():
    src = pinned_source()
    names = re.findall(r'\{"([a-z0-9-]+)",\s*COMMON_SPECULATIVE_TYPE_\w+\}', (src / "common/speculative.cpp").read_text())
    assert tuple(names) == SPEC_TYPES
    enum = re.search(r"enum common_speculative_type \{(.*?)\};", (src / "common/common.h").read_text(), re.S).group(1)
    members = [m.lower().replace("_", "-") for m in re.findall(r"COMMON_SPECULATIVE_TYPE_(\w+)", enum) if m != "COUNT"]
    assert tuple(members) == SPEC_TYPES
    assert set(NGRAM_METHODS) == {n for n in SPEC_TYPES if n.startswith("ngram-")}
    detect = (src / "common/speculative.cpp").read_text()
    assert '".nextn.eh_proj.weight"' in detect and '"markov_w1.weight"' in detect and 'arch != "dflash"' in detect


def test_an_ordinary_model_is_a_draft_model_that_needs_the_flag(tmp_path, smollm2_path):
    info = inspect_source(smollm2_path)
    assert info.speculative_type == "draft-simple"
    assert info.speculative["flag"] == "--spec-type draft-simple" and not info.speculative["auto_detected"]
    assert draftless_methods(info) == list(NGRAM_METHODS)


def test_mtp_heads_in_the_last_block_whatever_the_architecture(tmp_path):
    heads = {"w": W, "blk.1.nextn.eh_proj.weight": W}
    for arch in ("llama", "qwen35"):  # qwen35 is hybrid: its heads still count
        info = inspect_source(_file(tmp_path, f"{arch}.gguf", arch, tensors=heads,
                                    kv={f"{arch}.block_count": (2, T.UINT32), f"{arch}.nextn_predict_layers": (1, T.UINT32)},
                                    hparams=arch == "llama"))
        assert info.speculative_type == "draft-mtp", arch
        assert info.speculative["auto_detected"] and info.speculative["nextn_layers"] == 1
        assert draftless_methods(info)[0] == "draft-mtp"
    # heads in another block than the last are not what llama.cpp looks for
    info = inspect_source(_file(tmp_path, "early.gguf", tensors={"w": W, "blk.0.nextn.eh_proj.weight": W}))
    assert info.speculative_type == "draft-simple"


def test_eagle3_dflash_and_dspark_sidecars_without_token_tables_are_read_and_named(tmp_path):
    eagle = inspect_source(_file(tmp_path, "e.gguf", "eagle3", tokens=None, width=64, kv={
        "eagle3.target_layers": ([1, 10, 20], T.ARRAY), "eagle3.target_hidden_size": (64, T.UINT32)}))
    assert eagle.tokenizer is None and eagle.speculative_type == "draft-eagle3"
    assert eagle.speculative["flag"] == "--spec-type draft-eagle3" and eagle.speculative["warnings"] == []
    broken = inspect_source(_file(tmp_path, "e2.gguf", "eagle3", tokens=None, width=64,
                                  kv={"eagle3.target_layers": ([1, 2], T.ARRAY)}))
    assert any("exactly 3" in w for w in broken.speculative["warnings"])
    assert any("target_hidden_size is missing" in w for w in broken.speculative["warnings"])
    dflash = inspect_source(_file(tmp_path, "d.gguf", "dflash", tokens=None, width=64,
                                  kv={"dflash.target_layers": ([1, 3], T.ARRAY)}))
    assert dflash.speculative_type == "draft-dflash" and dflash.speculative["auto_detected"]
    dspark = inspect_source(_file(tmp_path, "s.gguf", "dflash", tokens=None, width=64, tensors={"markov_w1.weight": W},
                                  kv={"dflash.target_layers": ([1], T.ARRAY)}))
    assert dspark.speculative_type == "draft-dspark"


def test_recurrent_and_tableless_files_offer_nothing(tmp_path):
    assert inspect_source(_file(tmp_path, "m.gguf", "mamba", hparams=False)).speculative_type is None
    assert inspect_source(_file(tmp_path, "n.gguf", tokens=None)).speculative_type is None


def test_check_pair_explains_each_methods_requirements(tmp_path):
    target = inspect_source(_file(tmp_path, "t.gguf", kv={"llama.block_count": (24, T.UINT32)}, width=64))
    good = inspect_source(_file(tmp_path, "e.gguf", "eagle3", tokens=None, width=32, kv={
        "eagle3.target_layers": ([1, 12, 24], T.ARRAY), "eagle3.target_hidden_size": (64, T.UINT32)}))
    r = check_pair(target, good)
    assert r.method == "draft-eagle3" and r.compatible
    assert [c.rule for c in r.checks] == ["eagle3_layers", "eagle3_width"]
    bad = inspect_source(_file(tmp_path, "e2.gguf", "eagle3", tokens=None, width=32, kv={
        "eagle3.target_layers": ([1, 12, 30], T.ARRAY), "eagle3.target_hidden_size": (128, T.UINT32)}))
    r = check_pair(target, bad)
    assert not r.compatible and r.failed_rule == "eagle3_layers"
    assert [c.ok for c in r.checks] == [False, False] and "[30]" in r.checks[0].detail
    dflash = inspect_source(_file(tmp_path, "d.gguf", "dflash", tokens=None, width=48,
                                  kv={"dflash.target_layers": ([1, 23], T.ARRAY)}))
    r = check_pair(target, dflash)
    assert r.method == "draft-dflash" and r.failed_rule == "dflash_width" and "48" in r.checks[1].detail


def test_draft_simple_keeps_its_six_rules_and_the_cli_reports_the_method(smollm2_path):
    out = _cli("check_pair", str(smollm2_path), str(smollm2_path), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["method"] == "draft-simple" and [c["rule"] for c in d["checks"]] == [
        "architecture", "vocab_type", "bos", "eos", "vocab_size", "token_text"]
    alone = _cli("check_pair", str(smollm2_path))
    assert alone.returncode == 0, alone.stderr
    assert "ngram-mod" in alone.stdout and "no second model" in alone.stdout
    inspected = json.loads(_cli("inspect_gguf", str(smollm2_path), "--json").stdout)
    assert inspected["speculative_type"] == "draft-simple"
    assert "--spec-type draft-simple" in _cli("inspect_gguf", str(smollm2_path)).stdout


def test_sidecars_pass_through_the_cli(tmp_path):
    path = _file(tmp_path, "e.gguf", "eagle3", tokens=None, width=64,
                 kv={"eagle3.target_layers": ([1, 2, 3], T.ARRAY), "eagle3.target_hidden_size": (64, T.UINT32)})
    out = _cli("inspect_gguf", str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["speculative_type"] == "draft-eagle3"


@pytest.mark.django_db
def test_the_model_page_and_api_show_the_method(client, smollm2_path):
    from registry.registration import register

    reg = register(inspect_source(smollm2_path), source=str(smollm2_path))
    page = client.get(f"/models/{reg.file.model_id}/").content.decode()
    assert "draft-simple" in page and "--spec-type draft-simple" in page
    assert client.get(f"/api/files/{reg.file.pk}").json()["info"]["speculative_type"] == "draft-simple"
