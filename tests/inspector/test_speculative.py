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
from inspector.speculative import (
    FINAL_LAYER_INPUT_ARCHS,
    LAYER_INPUT_ARCHS,
    NGRAM_METHODS,
    SPEC_TYPES,
    draftless_methods,
)
from tests.ggufgen import vocab, write_gguf
from tests.llama_source import pinned_source

ROOT = Path(__file__).resolve().parents[2]
W = np.zeros((4, 4), dtype=np.float32)
TOKENS = vocab(300)


def _file(
    tmp_path: Path,
    name: str,
    arch: str = "llama",
    *,
    tokens=TOKENS,
    kv=None,
    tensors=None,
    hparams: bool = True,
    width: int | None = None,
) -> Path:
    extra = dict(kv or {})
    if width is not None:
        extra[f"{arch}.embedding_length"] = (width, T.UINT32)
    return write_gguf(
        tmp_path / name,
        arch=arch,
        tokens=tokens,
        model="gpt2" if tokens else None,
        pre="qwen2" if tokens else None,
        kv=extra,
        tensors=tensors or {"w": W},
        hparams=hparams and width is None,
    )


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_the_method_names_are_the_pinned_builds():
    src = pinned_source()
    names = re.findall(
        r'\{"([a-z0-9-]+)",\s*COMMON_SPECULATIVE_TYPE_\w+\}', (src / "common/speculative.cpp").read_text()
    )
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
        info = inspect_source(
            _file(
                tmp_path,
                f"{arch}.gguf",
                arch,
                tensors=heads,
                kv={f"{arch}.block_count": (2, T.UINT32), f"{arch}.nextn_predict_layers": (1, T.UINT32)},
                hparams=arch == "llama",
            )
        )
        assert info.speculative_type == "draft-mtp", arch
        assert info.speculative["auto_detected"] and info.speculative["nextn_layers"] == 1
        assert draftless_methods(info)[0] == "draft-mtp"
    # heads in another block than the last are not what llama.cpp looks for
    info = inspect_source(_file(tmp_path, "early.gguf", tensors={"w": W, "blk.0.nextn.eh_proj.weight": W}))
    assert info.speculative_type == "draft-simple"


def test_eagle3_dflash_and_dspark_sidecars_without_token_tables_are_read_and_named(tmp_path):
    eagle = inspect_source(
        _file(
            tmp_path,
            "e.gguf",
            "eagle3",
            tokens=None,
            width=64,
            kv={"eagle3.target_layers": ([1, 10, 20], T.ARRAY), "eagle3.target_hidden_size": (64, T.UINT32)},
        )
    )
    assert eagle.tokenizer is None and eagle.speculative_type == "draft-eagle3"
    assert eagle.speculative["flag"] == "--spec-type draft-eagle3" and eagle.speculative["warnings"] == []
    broken = inspect_source(
        _file(tmp_path, "e2.gguf", "eagle3", tokens=None, width=64, kv={"eagle3.target_layers": ([1, 2], T.ARRAY)})
    )
    assert any("exactly 3" in w for w in broken.speculative["warnings"])
    assert any("target_hidden_size is missing" in w for w in broken.speculative["warnings"])
    dflash = inspect_source(
        _file(tmp_path, "d.gguf", "dflash", tokens=None, width=64, kv={"dflash.target_layers": ([1, 3], T.ARRAY)})
    )
    assert dflash.speculative_type == "draft-dflash" and dflash.speculative["auto_detected"]
    dspark = inspect_source(
        _file(
            tmp_path,
            "s.gguf",
            "dflash",
            tokens=None,
            width=64,
            tensors={"markov_w1.weight": W},
            kv={"dflash.target_layers": ([1], T.ARRAY)},
        )
    )
    assert dspark.speculative_type == "draft-dspark"


def test_memoryless_and_tableless_files_offer_nothing_and_recurrent_ones_draft(tmp_path):
    assert inspect_source(_file(tmp_path, "b.gguf", "bert", hparams=False)).speculative_type is None
    assert inspect_source(_file(tmp_path, "d.gguf", "dream", hparams=False)).speculative_type is None
    assert inspect_source(_file(tmp_path, "n.gguf", tokens=None)).speculative_type is None
    mamba = inspect_source(_file(tmp_path, "m.gguf", "mamba", hparams=False))
    assert (
        mamba.speculative_type == "draft-simple"
        and "checkpoints its recurrent state" in mamba.speculative["explanation"]
    )


def test_check_pair_explains_each_methods_requirements(tmp_path):
    target = inspect_source(_file(tmp_path, "t.gguf", kv={"llama.block_count": (24, T.UINT32)}, width=64))
    good = inspect_source(
        _file(
            tmp_path,
            "e.gguf",
            "eagle3",
            tokens=None,
            width=32,
            kv={"eagle3.target_layers": ([1, 12, 24], T.ARRAY), "eagle3.target_hidden_size": (64, T.UINT32)},
        )
    )
    r = check_pair(target, good)
    assert r.method == "draft-eagle3" and r.compatible
    assert [c.rule for c in r.checks] == ["eagle3_layers", "eagle3_width", "target_layer_inputs"]
    bad = inspect_source(
        _file(
            tmp_path,
            "e2.gguf",
            "eagle3",
            tokens=None,
            width=32,
            kv={"eagle3.target_layers": ([1, 12, 30], T.ARRAY), "eagle3.target_hidden_size": (128, T.UINT32)},
        )
    )
    r = check_pair(target, bad)
    assert not r.compatible and r.failed_rule == "eagle3_layers"
    assert [c.ok for c in r.checks] == [False, False, True] and "[30]" in r.checks[0].detail
    dflash = inspect_source(
        _file(tmp_path, "d.gguf", "dflash", tokens=None, width=48, kv={"dflash.target_layers": ([1, 23], T.ARRAY)})
    )
    r = check_pair(target, dflash)
    assert r.method == "draft-dflash" and r.failed_rule == "dflash_width" and "48" in r.checks[1].detail


def _eagle3(tmp_path: Path, name: str, layers: list[int], hidden: int = 64):
    return inspect_source(
        _file(
            tmp_path,
            name,
            "eagle3",
            tokens=None,
            width=32,
            kv={"eagle3.target_layers": (layers, T.ARRAY), "eagle3.target_hidden_size": (hidden, T.UINT32)},
        )
    )


def _dflash(tmp_path: Path, name: str, layers: list[int], width: int = 64, dspark: bool = False):
    tensors = {"w": W, "markov_w1.weight": W} if dspark else None
    return inspect_source(
        _file(
            tmp_path,
            name,
            "dflash",
            tokens=None,
            width=width,
            tensors=tensors,
            kv={"dflash.target_layers": (layers, T.ARRAY)},
        )
    )


def _target(tmp_path: Path, name: str, arch: str = "llama", blocks: int = 24, nextn: int = 0, width: int = 64):
    kv = {f"{arch}.block_count": (blocks, T.UINT32)}
    if nextn:
        kv[f"{arch}.nextn_predict_layers"] = (nextn, T.UINT32)
    return inspect_source(_file(tmp_path, name, arch, kv=kv, width=width))


def test_the_layer_id_rules_are_the_pinned_sources():
    src = pinned_source()
    spec = (src / "common/speculative.cpp").read_text()
    # EAGLE-3: below n_layer a layer input, n_layer the last hidden state, above it an abort
    assert re.search(
        r"if \(target_layer_ids\[k\] < n_layer_tgt\) \{\s*llama_set_embeddings_layer_inp.*?"
        r"\} else if \(target_layer_ids\[k\] == n_layer_tgt\) \{\s*llama_set_embeddings_nextn.*?"
        r"\} else \{\s*GGML_ABORT",
        spec,
        re.S,
    )
    # DFlash: every id a layer input, whose index may reach n_layer ...
    assert re.search(
        r"for \(uint32_t k = 0; k < target_layer_ids_n; \+\+k\) \{\s*"
        r"llama_set_embeddings_layer_inp\(ctx_tgt, \(uint32_t\) target_layer_ids\[k\], true\);",
        spec,
    )
    assert "GGML_ASSERT(lid <= model.hparams.n_layer());" in (src / "src/llama-context.cpp").read_text()
    assert (
        'GGML_ASSERT(t_layer_inp[il] != nullptr && "layer input tensor is null")'
        in (src / "src/llama-graph.cpp").read_text()
    )
    # ... but only these graphs build input n_layer (the last block's output)
    final = {f.name for f in (src / "src/models").glob("*.cpp") if "t_layer_inp[n_layer] =" in f.read_text()}
    assert final == {"deepseek4.cpp", "mimo2.cpp", "nemotron-h.cpp"}
    assert "using graph = llama_model_nemotron_h::graph;" in (src / "src/models/models.h").read_text()
    arch_names = (src / "src/llama-arch.cpp").read_text()
    for arch in FINAL_LAYER_INPUT_ARCHS:
        assert f'"{arch}"' in arch_names, arch
    # n_layer leaves out the MTP blocks; MTP compares the output widths
    assert "return n_layer_all - n_layer_nextn;" in (src / "src/llama-hparams.cpp").read_text()
    assert "n_embd_out_impl > 0 ? n_embd_out_impl : n_embd" in (src / "src/llama-hparams.cpp").read_text()
    assert re.search(r"GGML_ASSERT\(n_embd == llama_model_n_embd_out\(llama_get_model\(ctx_tgt\)\)", spec)


def _graph_of(cls: str, structs: dict[str, tuple[str, str]]) -> str:
    """The class whose ``graph`` an architecture's model class builds: its own, an alias, or a parent's."""
    while cls in structs:
        parent, body = structs[cls]
        if alias := re.search(r"using graph = (llama_model_\w+)::graph", body):
            return alias[1]
        if re.search(r"struct graph\b", body):
            return cls
        cls = parent
    return cls


def test_the_architectures_exposing_layer_inputs_are_the_pinned_sources():
    src = pinned_source()
    tapping = {
        m
        for f in (src / "src/models").glob("*.cpp")
        if re.search(r"t_layer_inp\[il\]\s*=", t := f.read_text())
        for m in re.findall(r"(llama_model_\w+)::graph(?:<[^>]*>)?::graph\(", t)
    }
    structs = {
        m[1]: (m[2], m[3])
        for m in re.finditer(
            r"struct (llama_model_\w+)\s*:\s*public (\w+)\s*\{(.*?)\n\};",
            (src / "src/models/models.h").read_text(),
            re.S,
        )
    }
    names = dict(re.findall(r'\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}', (src / "src/llama-arch.cpp").read_text()))
    created = re.findall(
        r"case (LLM_ARCH_\w+):\s*return new (llama_model_\w+)\(", (src / "src/llama-model.cpp").read_text()
    )
    assert len(tapping) >= 10 and len(created) > 100  # the patterns still find what they look for
    assert tuple(sorted(names[a] for a, cls in created if _graph_of(cls, structs) in tapping)) == LAYER_INPUT_ARCHS
    assert "llm->res->set_outputs(params);" in (src / "src/llama-model.cpp").read_text()


def test_a_target_whose_graph_hides_its_layer_inputs_cannot_feed_a_sidecar(tmp_path):
    qwen2 = _target(tmp_path, "q.gguf", "qwen2", blocks=28)  # Qwen2.5: no t_layer_inp in b11434's qwen2 graph
    for side in (_eagle3(tmp_path, "e.gguf", [2, 14, 27]), _dflash(tmp_path, "d.gguf", [1, 13, 26])):
        r = check_pair(qwen2, side)
        assert r.failed_rule == "target_layer_inputs" and "layer input tensor is null" in r.checks[-1].detail
    # an EAGLE-3 id equal to n_layer reads the last hidden state, not a layer input
    assert check_pair(qwen2, _eagle3(tmp_path, "e28.gguf", [28, 28, 28])).compatible


def test_eagle3_layer_ids_may_name_the_last_hidden_state_but_nothing_past_it(tmp_path):
    target = _target(tmp_path, "t.gguf")
    assert check_pair(target, _eagle3(tmp_path, "e.gguf", [0, 12, 24])).compatible  # 24: the last hidden state
    for layers in ([1, 12, 25], [-1, 12, 24]):
        r = check_pair(target, _eagle3(tmp_path, "bad.gguf", layers))
        assert r.failed_rule == "eagle3_layers" and "valid ids 0–24" in r.checks[0].detail, layers
    # MTP blocks are not layers the ids can name: 25 blocks with one next-n block have 24 layers
    mtp = _target(tmp_path, "mtp.gguf", blocks=25, nextn=1)
    assert check_pair(mtp, _eagle3(tmp_path, "e.gguf", [1, 12, 24])).compatible
    r = check_pair(mtp, _eagle3(tmp_path, "e25.gguf", [1, 12, 25]))
    assert r.failed_rule == "eagle3_layers" and "MTP block not counted" in r.checks[0].detail


def test_dflash_layer_ids_stop_below_the_block_count_unless_the_target_builds_its_last_output(tmp_path):
    llama, nemo = _target(tmp_path, "t.gguf"), _target(tmp_path, "n.gguf", "nemotron_h")
    assert check_pair(llama, _dflash(tmp_path, "d.gguf", [0, 23])).compatible
    last = _dflash(tmp_path, "d24.gguf", [1, 24])
    r = check_pair(llama, last)
    assert r.failed_rule == "dflash_layers" and "[24]" in r.checks[0].detail and "nemotron_h" in r.checks[0].detail
    assert check_pair(nemo, last).compatible
    assert check_pair(nemo, _dflash(tmp_path, "d25.gguf", [1, 25])).failed_rule == "dflash_layers"
    assert check_pair(llama, _dflash(tmp_path, "neg.gguf", [-1, 3])).failed_rule == "dflash_layers"


def test_dspark_is_checked_like_dflash(tmp_path):
    target = _target(tmp_path, "t.gguf")
    r = check_pair(target, _dflash(tmp_path, "s.gguf", [1, 12, 23], dspark=True))
    assert r.method == "draft-dspark" and r.compatible
    assert [c.rule for c in r.checks] == ["dflash_layers", "dflash_width", "target_layer_inputs"]
    r = check_pair(target, _dflash(tmp_path, "s2.gguf", [1, 24], width=48, dspark=True))
    assert r.method == "draft-dspark" and not r.compatible and [c.ok for c in r.checks] == [False, False, True]
    assert "48" in r.checks[1].detail and "64" in r.checks[1].detail


def _mtp(tmp_path: Path, name: str, width: int | None, out: int | None = None):
    kv = {"qwen35.block_count": (2, T.UINT32), "qwen35.nextn_predict_layers": (1, T.UINT32)}
    if out is not None:
        kv["qwen35.embedding_length_out"] = (out, T.UINT32)
    return inspect_source(
        _file(
            tmp_path,
            name,
            "qwen35",
            kv=kv,
            width=width,
            hparams=False,
            tensors={"w": W, "blk.1.nextn.eh_proj.weight": W},
        )
    )


def test_mtp_heads_must_take_rows_as_wide_as_the_targets_output(tmp_path):
    target = _target(tmp_path, "t.gguf", width=64)
    same = check_pair(target, _mtp(tmp_path, "m.gguf", 64))
    assert same.method == "draft-mtp" and same.compatible and [c.rule for c in same.checks] == ["mtp_width"]
    narrow = check_pair(target, _mtp(tmp_path, "m48.gguf", 48))
    assert narrow.failed_rule == "mtp_width" and not narrow.llama_cpp_compatible
    assert "48" in narrow.checks[0].detail and "64" in narrow.checks[0].detail
    # llama.cpp compares n_embd_out: embedding_length_out when the file sets it
    out = check_pair(target, _mtp(tmp_path, "mout.gguf", 64, out=32))
    assert out.failed_rule == "mtp_width" and "32" in out.checks[0].detail
    unknown = check_pair(target, _mtp(tmp_path, "mnone.gguf", None))
    assert unknown.checks[0].ok is None and unknown.llama_cpp_compatible and not unknown.compatible


def test_draft_simple_keeps_its_six_rules_and_the_cli_reports_the_method(smollm2_path):
    out = _cli("check_pair", str(smollm2_path), str(smollm2_path), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["method"] == "draft-simple" and [c["rule"] for c in d["checks"]] == [
        "architecture",
        "vocab_type",
        "bos",
        "eos",
        "vocab_size",
        "token_text",
    ]
    alone = _cli("check_pair", str(smollm2_path))
    assert alone.returncode == 0, alone.stderr
    assert "ngram-mod" in alone.stdout and "no second model" in alone.stdout
    inspected = json.loads(_cli("inspect_gguf", str(smollm2_path), "--json").stdout)
    assert inspected["speculative_type"] == "draft-simple"
    assert "--spec-type draft-simple" in _cli("inspect_gguf", str(smollm2_path)).stdout


def test_sidecars_pass_through_the_cli(tmp_path):
    path = _file(
        tmp_path,
        "e.gguf",
        "eagle3",
        tokens=None,
        width=64,
        kv={"eagle3.target_layers": ([1, 2, 3], T.ARRAY), "eagle3.target_hidden_size": (64, T.UINT32)},
    )
    out = _cli("inspect_gguf", str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["speculative_type"] == "draft-eagle3"


@pytest.mark.django_db
def test_the_model_page_and_api_show_the_method(client, smollm2_path):
    from registry.catalog.registration import register

    reg = register(inspect_source(smollm2_path), source=str(smollm2_path))
    page = client.get(f"/models/{reg.file.model_id}/").content.decode()
    assert "draft-simple" in page and "--spec-type draft-simple" in page
    assert client.get(f"/api/files/{reg.file.pk}").json()["info"]["speculative_type"] == "draft-simple"
