"""The ggml type table specreg keeps (inspector/ggml_types.py) is the pinned build's, compiled from its source."""

from __future__ import annotations

import re
import subprocess

from inspector.ggml_constants import GGML_TYPE_NAMES
from inspector.ggml_types import GGML_MAX_DIMS, GGML_MAX_NAME, GGML_TYPE_COUNT, TYPE_TRAITS
from tests.llama_source import pinned_source


def _type_traits(src) -> list[tuple[str, str, str, str]]:
    """(index expression, type_name, blck_size expression, type_size expression) from ggml.c."""
    text = (src / "ggml/src/ggml.c").read_text()
    body = re.search(r"type_traits\[GGML_TYPE_COUNT\] = \{(.*?)\n\};", text, re.S).group(1)
    out = []
    for index, entry in re.findall(r"\[(\w+)\]\s*=\s*\{(.*?)\n    \},", body, re.S):
        name = re.search(r'\.type_name\s*=\s*"([^"]*)"', entry).group(1)
        blck, size = (re.search(rf"\.{k}\s*=\s*([^,]+),", entry).group(1).strip() for k in ("blck_size", "type_size"))
        out.append((index, name, blck, size))
    return out


def test_type_table_matches_ggml_c_compiled(tmp_path):
    """The sizes are C expressions (sizeof(block_q4_K), QK_K…): a C compiler evaluates them from the pinned headers."""
    src = pinned_source()
    traits = _type_traits(src)
    assert len(traits) == GGML_TYPE_COUNT
    prints = "\n".join(
        f'printf("%d %lld %zu\\n", (int)({i}), (long long)({b}), (size_t)({s}));' for i, _, b, s in traits
    )
    c = tmp_path / "traits.c"
    c.write_text(
        '#include <stdio.h>\n#include "ggml.h"\n#define GGML_COMMON_DECL_C\n#include "ggml-common.h"\n'
        f"int main(void) {{\n{prints}\nreturn 0;\n}}\n"
    )
    exe = tmp_path / "traits"
    subprocess.run(["gcc", f"-I{src}/ggml/include", f"-I{src}/ggml/src", str(c), "-o", str(exe)], check=True)
    compiled = {}
    for line, (_, name, _, _) in zip(
        subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines(), traits, strict=True
    ):
        i, blck, size = map(int, line.split())
        compiled[i] = (name, blck, size)
    assert {i: tuple(t) for i, t in TYPE_TRAITS.items()} == compiled


def test_live_types_are_the_enum_and_limits_are_ggml_h():
    assert {i for i, t in TYPE_TRAITS.items() if t.blck_size} == set(GGML_TYPE_NAMES)
    assert all(TYPE_TRAITS[i].name.lower() == n.lower() for i, n in GGML_TYPE_NAMES.items())
    ggml_h = (pinned_source() / "ggml/include/ggml.h").read_text()
    assert GGML_MAX_NAME == int(re.search(r"#\s*define GGML_MAX_NAME\s+(\d+)", ggml_h).group(1))
    assert GGML_MAX_DIMS == int(re.search(r"#define GGML_MAX_DIMS\s+(\d+)", ggml_h).group(1))
