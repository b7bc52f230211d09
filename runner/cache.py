"""specreg's cache folder (the llama.cpp wheel and source, the replay tool, kept records, hashes) and file hashing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("SPECREG_CACHE_DIR") or Path.home() / ".cache" / "specreg")


def sha256_file(path: Path | str) -> str:
    """A file's sha256 (the pinned source's, a download's, a model's for runner.predict.kept)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
