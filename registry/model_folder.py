"""The model folder (``SPECREG_MODEL_DIR``) against its disk budget: one reckoning for everything that writes into it
(the runner's downloads, the pair page's adapt job)."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings


def model_dir() -> Path:
    return Path(settings.SPECREG_MODEL_DIR)


def used_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path``; links are not counted (huggingface_hub's snapshot entries link to
    its blobs: each download counts once)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.exists() else 0


def room_problem(need: int) -> str | None:
    """Why ``need`` more bytes cannot go into the model folder (past SPECREG_DISK_BUDGET_BYTES, or more than the disk
    has free), in words that follow "X needs …"; None when they fit. The folder is made if missing."""
    folder = model_dir()
    folder.mkdir(parents=True, exist_ok=True)
    used = used_bytes(folder)
    budget = settings.SPECREG_DISK_BUDGET_BYTES
    if used + need > budget:
        return f"needs {need:,} bytes but only {budget - used:,} remain of the disk budget (SPECREG_DISK_BUDGET_BYTES)"
    free = shutil.disk_usage(folder).free
    if need > free:
        return f"needs {need:,} bytes but the disk has {free:,} free"
    return None
