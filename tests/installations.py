"""An installation of its own for a test that runs manage.py as a user does: its data folder (SQLite, filesystem
broker), migrated, and the environment that names it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def migrated_env(tmp_path: Path, hardware: str) -> dict[str, str]:
    """This process's environment with its data folder ``tmp_path``/data, migrated, and the hardware class
    ``hardware``; the test settings' database, broker and queues left out."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "TEST_DATABASE_NAME", "SPECREG_QUEUE_PREFIX")
    }
    env.update(SPECREG_DATA_DIR=str(tmp_path / "data"), SPECREG_HARDWARE_CLASS=hardware)
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    return env


def installation(tmp_path: Path) -> tuple[Path, dict[str, str], list[str]]:
    """A migrated installation of its own: its data folder, its environment and manage.py's argv."""
    env = migrated_env(tmp_path, "cpu-serve-test")
    return tmp_path / "data", env, [sys.executable, str(ROOT / "manage.py")]
