"""Whether llama.cpp runs a local model file with checkpoints (inspector.state), read from its header once.

A checkpointed target changes what a run must do: the CLI's printed acceptance counts replayed tokens (the runner
counts rounds instead), and a prediction replays llama.cpp's checkpoint branch and prices its save, restore and
second pass.
"""

from __future__ import annotations

import functools
import os

from inspector.info import InspectError, inspect_source
from inspector.llama_rules import STATE_CHECKPOINTS, state_kind


@functools.lru_cache(maxsize=64)
def _checkpointed(path: str, size: int, mtime_ns: int, role: str, method: str) -> bool:
    try:
        info = inspect_source(path)
    except InspectError:
        return False  # llama.cpp will say what is wrong with the file
    return state_kind(info.architecture, info.arch_kind, role, method) == STATE_CHECKPOINTS


def checkpointed(path: str, role: str, method: str = "draft-simple") -> bool:
    """Whether the ``role`` ("target" or "draft") context of this file speculates with checkpoints for ``method``."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return _checkpointed(path, st.st_size, st.st_mtime_ns, role, method)
