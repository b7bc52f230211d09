"""A running run's heartbeat, progress and cancel flag, written to its record from a side thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from registry.models import BenchmarkRun
from runner.llama import procs
from runner.runs.records import log

HEARTBEAT_S = 10  # how often a running worker proves it is alive


class Reporter:
    """Heartbeats, progress and the cancel flag of one running run, throttled to one write per beat."""

    def __init__(self, run_id: int, echo: Callable[[str], None] | None = None) -> None:
        self.run_id = run_id
        self.cancelled = False
        # A run executed in a terminal (run_benchmark --here) prints each step and progress message as it comes:
        # the record's progress is written once per beat, too seldom to follow from there.
        self._echo = echo
        self._echoed = ""
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._progress: tuple[float, str] | None = None
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self.flush()
            except DatabaseError:
                pass  # a busy or briefly unreachable database: the next beat tries again
        close_old_connections()

    def flush(self) -> None:
        with self._lock:
            pending, self._progress = self._progress, None
        fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
        if pending:
            fields.update(progress=pending[0], progress_message=pending[1][:300])
        BenchmarkRun.objects.filter(pk=self.run_id, status=BenchmarkRun.RUNNING).update(**fields)
        if BenchmarkRun.objects.filter(pk=self.run_id, cancel_requested=True).exists():
            self.cancelled = True

    def progress(self, fraction: float, message: str) -> None:
        with self._lock:
            self._progress = (fraction, message)
        if self._echo is not None and message != self._echoed:
            self._echoed = message
            self._print(f"{fraction * 100:5.1f}% {message}")

    def step(self, line: str) -> None:
        """A step starting or ending: a line of the run's log, and of the terminal that executes it here."""
        log(self.run_id, line)
        if self._echo is not None:
            self._print(line)

    def _print(self, line: str) -> None:
        if self._echo is not None:
            self._echo(f"[{time.monotonic() - self._started:4.0f} s] {line}")

    def should_cancel(self) -> bool:
        # A stopping worker (SIGTERM) cancels too: the next step must not start.
        return self.cancelled or procs.SHUTDOWN.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
