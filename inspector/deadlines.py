"""Deadlines of remote reads: one end shared by every request of a read or a job, each request's timeouts
cut to what is left, and a watchdog that shuts the sockets when it passes."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpx2
from huggingface_hub import get_session

from .errors import DeadlineExceeded, SourceError

# huggingface_hub's shared client has no timeout at all; a dead host must fail fast, a slow CDN may take a while.
READ_TIMEOUT, CONNECT_TIMEOUT = 30.0, 10.0


DEFAULT_HEADER_DEADLINE = 60.0  # seconds for one whole header read; see header_deadline_seconds


def header_deadline_seconds() -> float:
    """SPECREG_HEADER_DEADLINE_SECONDS (default 60): the most one remote header read may take, all requests together.

    Timeouts apply to each socket read, so a server that sends a byte every few seconds would never
    trip them; this bounds the whole read.
    """
    value = os.environ.get("SPECREG_HEADER_DEADLINE_SECONDS", "").strip()
    try:
        seconds = float(value) if value else DEFAULT_HEADER_DEADLINE
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise SourceError(f"SPECREG_HEADER_DEADLINE_SECONDS: expected a positive number of seconds, got {value!r}")
    return seconds


class Deadline:
    """The end of the remote reads of one request or job, shared by all of them: both files of a check,
    every shard, every request, headers included. Each request's timeouts are cut to what is left.

    Socket timeouts bound one read each, so a server sending a byte at a time never trips them, and a
    helper thread still waiting for an answer keeps its socket. So the reads go through an HTTP client
    of the deadline's own, and a watchdog shuts down every socket it opened once the deadline passes:
    a read blocked on one, in any thread, returns at once and fails. ``close`` (or leaving ``with``)
    ends them all for good and stops the watchdog.
    """

    def __init__(self, seconds: float | None = None, *, reason: str | None = None) -> None:
        self.seconds = header_deadline_seconds() if seconds is None else seconds
        self.at = time.monotonic() + self.seconds
        # What the one-line error says after the source's name.
        self.reason = reason or (
            f"the header was not read within {self.seconds:g} s (SPECREG_HEADER_DEADLINE_SECONDS); "
            "the server is too slow"
        )
        # Inside a job (job_deadline), every read ends by the job's end too, and then says so.
        job = _JOB.get()
        if job is not None and job.at < self.at:
            self.at, self.reason = job.at, job.reason
        self._lock = threading.Lock()
        self._client: httpx2.Client | None = None
        self._streams: list[Any] = []  # the network streams (connections) its client opened
        self._watchdog: threading.Timer | None = None
        self.expired = False  # the watchdog shut the sockets (or the deadline was closed)

    def client(self) -> httpx2.Client:
        """The HTTP client for these reads, made on first use along with the watchdog that ends them."""
        with self._lock:
            if self._client is None:
                # As huggingface_hub's shared client (its request hooks: offline mode, request ids, read from
                # the public client rather than its private module), but with connections of its own: the
                # watchdog may shut them without touching anyone else's reads.
                hooks = list(get_session().event_hooks.get("request", []))
                self._client = httpx2.Client(event_hooks={"request": hooks}, timeout=None)
                self._watchdog = threading.Timer(max(0.0, self.at - time.monotonic()), self._shut_sockets)
                self._watchdog.daemon = True
                self._watchdog.start()
            return self._client

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: remember each connection as it opens (its TLS layer too)."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            with self._lock:
                self._streams.append(stream)
                late = self.expired
            if late:  # opened after the end: no read may start on it
                _shut(stream)

    def _shut_sockets(self) -> None:
        with self._lock:
            self.expired = True
            streams = list(self._streams)
        for stream in streams:
            _shut(stream)

    def close(self) -> None:
        """End every connection of these reads (a helper thread may still wait on one) and the watchdog."""
        with self._lock:
            watchdog, client = self._watchdog, self._client
        if watchdog is not None:
            watchdog.cancel()
        self._shut_sockets()
        if client is not None:
            client.close()

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self, name: str) -> float:
        """Seconds left; raises the one-line error once none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise self.error(name)
        return left

    def error(self, name: str) -> DeadlineExceeded:
        return DeadlineExceeded(f"{name}: {self.reason}")

    def timeout(self, name: str) -> httpx2.Timeout:
        left = self.check(name)
        return httpx2.Timeout(min(READ_TIMEOUT, left), connect=min(CONNECT_TIMEOUT, left))

    def passed(self) -> bool:
        return self.expired or time.monotonic() >= self.at


_JOB: ContextVar[Deadline | None] = ContextVar("specreg_job_deadline", default=None)


@contextmanager
def job_deadline(seconds: float, reason: str) -> Iterator[Deadline]:
    """Within: one end for every remote read of a background job (an import of many files, a draft search).

    Each read keeps its own deadline (SPECREG_HEADER_DEADLINE_SECONDS for a file) but ends by the job's
    end at the latest, its watchdog shutting the socket then; a read begun after the end fails at once,
    without a request. ``reason`` is what such a read's error says after the source's name."""
    deadline = Deadline(seconds, reason=reason)
    token = _JOB.set(deadline)
    try:
        yield deadline
    finally:
        _JOB.reset(token)
        deadline.close()


def current_job_deadline() -> Deadline | None:
    """The deadline of the job running in this context (``job_deadline``), or None."""
    return _JOB.get()


def _shut(stream: Any) -> None:
    """Shut a connection's socket down both ways: a read blocked on it returns at once (closing the socket
    alone would leave that read waiting). A plain socket under TLS is detached already: nothing to do."""
    try:
        sock = stream.get_extra_info("socket")
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError, ValueError):
        pass
