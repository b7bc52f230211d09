"""The GGUF and ggml constants specreg keeps agree with the pinned llama.cpp source."""

from __future__ import annotations

import re

from inspector.ggml_constants import (
    GGML_MAX_DIMS,
    GGML_TYPE_COUNT,
    GGML_TYPE_NAMES,
    GGUF_DEFAULT_ALIGNMENT,
    LLAMA_FTYPE_NAMES,
    GGUFValueType,
)
from tests.llama_source import pinned_source


def _enum(text: str, name: str) -> str:
    return re.search(rf"enum {name} \{{(.*?)\}};", text, re.S).group(1)


def test_ggml_types_and_max_dims_are_the_pinned_builds():
    ggml = (pinned_source() / "ggml/include/ggml.h").read_text()
    body = _enum(ggml, "ggml_type")
    live = {int(v): n for n, v in re.findall(r"^\s*GGML_TYPE_(\w+)\s*=\s*(\d+)", body, re.M) if n != "COUNT"}
    assert GGML_TYPE_NAMES == live  # commented-out (removed) types are absent from both
    assert GGML_TYPE_COUNT == int(re.search(r"GGML_TYPE_COUNT\s*=\s*(\d+)", body).group(1))
    assert GGML_MAX_DIMS == int(re.search(r"#define GGML_MAX_DIMS\s+(\d+)", ggml).group(1)) == 4


def test_gguf_value_types_and_alignment_are_the_pinned_builds():
    gguf = (pinned_source() / "ggml/include/gguf.h").read_text()
    names = re.findall(r"^\s*GGUF_TYPE_(\w+)\s*(?:=\s*\d+)?,", _enum(gguf, "gguf_type"), re.M)
    assert [t.name for t in GGUFValueType] == [n for n in names if n != "COUNT"]
    assert GGUF_DEFAULT_ALIGNMENT == int(re.search(r"#define GGUF_DEFAULT_ALIGNMENT\s+(\d+)", gguf).group(1))


def test_file_types_are_the_pinned_builds():
    llama = (pinned_source() / "include/llama.h").read_text()
    live = {
        int(v): n.removeprefix("MOSTLY_").removeprefix("ALL_")
        for n, v in re.findall(r"^\s*LLAMA_FTYPE_(\w+)\s*=\s*(\d+)", _enum(llama, "llama_ftype"), re.M)
        if n != "GUESSED"
    }
    assert LLAMA_FTYPE_NAMES == live
