"""A real Celery worker process for tests, on the test database and the configured broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def _database_url() -> str:
    s = connection.settings_dict  # NAME is the test database's by now
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Worker:
    def __init__(
        self, prefix: str, hardware: str, queues: str | None = None, pool: str = "prefork", concurrency: int = 1
    ) -> None:
        self.prefix = prefix
        self.hardware = hardware
        self.queues = queues
        self.pool = pool
        self.concurrency = concurrency
        self.proc: subprocess.Popen | None = None
        self.log = Path(settings.DATA_DIR) / f"worker-{prefix.rstrip('.')}.log"

    def start(self) -> None:
        env = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "SPECREG_QUEUE_PREFIX": self.prefix,
            "SPECREG_DATA_DIR": str(settings.DATA_DIR),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "SPECREG_HARDWARE_CLASS": self.hardware,
            "TEST_DATABASE_NAME": "",
        }
        env.pop("TEST_DATABASE_NAME")
        queues = self.queues or f"{self.prefix}specreg,{self.prefix}bench.{self.hardware}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "runner",
                "worker",
                "-Q",
                queues,
                "--concurrency",
                str(self.concurrency),
                "--pool",
                self.pool,
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"test-{self.prefix}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the worker and everything it started, as a machine loss would."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def wait_for(predicate, timeout: float, what: str, worker: Worker | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    tail = worker.output()[-3000:] if worker else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{tail}")


@pytest.fixture
def celery_worker_process(transactional_db, settings):
    """Start a worker on queues of a fresh prefix, so leftovers of other runs cannot reach it."""
    prefix = f"t{uuid.uuid4().hex[:8]}."
    settings.SPECREG_QUEUE_PREFIX = prefix
    settings.CELERY_TASK_DEFAULT_QUEUE = f"{prefix}specreg"
    worker = Worker(prefix, "cpu-test")
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
