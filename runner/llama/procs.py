"""Run one external process in its own process group with a time limit, cancellation and bounded capture."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

STDERR_HEAD = 64 * 1024  # the start of stderr says why a model failed to load
STDERR_TAIL = 1024 * 1024  # the end holds the timings
STDOUT_MAX = 16 * 1024 * 1024  # generated text; far more than any benchmark produces
TERM_GRACE_S = 2.0

# Set when this process is being stopped (SIGTERM/SIGINT to a worker or to `run_benchmark --here`):
# running processes are killed at once and no new one starts, so the stop takes seconds, not the
# rest of a benchmark.
SHUTDOWN = threading.Event()
_live_groups: set[int] = set()


@dataclass(frozen=True)
class ProcResult:
    """What one process run produced. ``rc`` is None when the process never started."""

    argv: tuple[str, ...]
    rc: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False
    cancelled: bool = False
    start_error: str | None = None
    stderr_truncated: bool = False
    pid: int | None = None  # also the process-group id

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out and not self.cancelled

    @property
    def state(self) -> str:
        """One word for the outcome: ok, failed, timeout, cancelled, not-started."""
        if self.start_error is not None:
            return "not-started"
        if self.cancelled:
            return "cancelled"
        if self.timed_out:
            return "timeout"
        return "ok" if self.rc == 0 else "failed"


class Capture:
    """Drains one pipe on a thread, keeping a head and a bounded tail."""

    def __init__(self, pipe, head: int, tail: int) -> None:
        self._pipe = pipe
        self._head_max = head
        self._tail_max = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        try:
            while chunk := self._pipe.read1(65536):
                room = self._head_max - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail += chunk
                excess = len(self.tail) - self._tail_max
                if excess > 0:
                    del self.tail[:excess]
                    self.dropped += excess
        except (OSError, ValueError):
            pass  # pipe closed under us after a kill

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes dropped ...]\n".encode() if self.dropped else b""
        return (bytes(self.head) + gap + bytes(self.tail)).decode("utf-8", errors="replace")


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all() -> None:
    """Refuse new processes and SIGKILL every live group started here; safe inside a signal handler."""
    SHUTDOWN.set()
    for pgid in list(_live_groups):
        _kill_group(pgid, signal.SIGKILL)


def stop_on_termination() -> None:
    """Make SIGTERM and SIGHUP to this process stop every group it started, then end it as the signal would.

    For a script that starts llama.cpp itself (the benchmark scripts): its processes lead process groups of
    their own, so a signal to the script's group (``timeout``, a closed terminal, a supervisor) misses them, and
    without this a terminated script leaves its ``llama-server`` running. Call it from the main thread.
    """

    def on_signal(signum: int, frame: object) -> None:
        stop_all()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)


def _group_gone(pgid: int, timeout_s: float) -> bool:
    """Wait until no live process is left in the group (a killed process takes a moment to exit)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if os.path.isdir("/proc"):
            if not group_members(pgid):
                return True
        else:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _terminate(proc: subprocess.Popen) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is left after a grace period."""
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    # the leader may be gone while children it started still run
    if not _group_gone(proc.pid, 0.0 if proc.returncode is None else TERM_GRACE_S / 2):
        _kill_group(proc.pid, signal.SIGKILL)
    proc.wait()
    _group_gone(proc.pid, 5.0)


def benchmark_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a llama.cpp process: the given one (or ours) without any ``LLAMA_ARG_*``.

    llama.cpp reads every option from ``LLAMA_ARG_<NAME>`` too: ``LLAMA_ARG_SPEC_TYPE`` left in a
    user's shell would make the plain baseline speculate, or change what a speculative run measures.
    """
    return {k: v for k, v in (os.environ if env is None else env).items() if not k.startswith("LLAMA_ARG_")}


def run_process(
    argv: Sequence[str],
    *,
    timeout_s: float,
    should_cancel: Callable[[], bool] | None = None,
    poll_s: float = 0.5,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> ProcResult:
    """Run ``argv`` (never through a shell) and return its outcome; never raises for the child's sake."""
    argv = tuple(str(a) for a in argv)
    start = time.monotonic()
    proc, problem = _spawn(argv, subprocess.PIPE, env, cwd)
    if proc is None:
        return ProcResult(argv, None, "", "", 0.0, cancelled=SHUTDOWN.is_set(), start_error=problem)
    out = Capture(proc.stdout, STDOUT_MAX, 0)
    err = Capture(proc.stderr, STDERR_HEAD, STDERR_TAIL)
    timed_out = cancelled = False
    deadline = start + timeout_s
    while True:
        try:
            proc.wait(timeout=max(0.0, min(poll_s, deadline - time.monotonic())))
            break
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() >= deadline:
            timed_out = True
        elif SHUTDOWN.is_set() or (should_cancel is not None and should_cancel()):
            cancelled = True
        if timed_out or cancelled:
            _terminate(proc)
            break
    wall = time.monotonic() - start
    _end_group(proc)
    cancelled = cancelled or SHUTDOWN.is_set()
    for cap in (out, err):
        cap.thread.join(timeout=5.0)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return ProcResult(
        argv=argv,
        rc=proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        wall_s=wall,
        timed_out=timed_out,
        cancelled=cancelled,
        stderr_truncated=err.dropped > 0,
        pid=proc.pid,
    )


def _spawn(
    argv: tuple[str, ...], stdout: int, env: Mapping[str, str] | None, cwd: str | os.PathLike | None = None
) -> tuple[subprocess.Popen | None, str | None]:
    """Start ``argv`` as the leader of a new process group registered in ``_live_groups`` (so
    ``stop_all`` reaches it): (process, None), or (None, why not) when stopping or it cannot start."""
    if SHUTDOWN.is_set():
        return None, "not started: this process is stopping"
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=benchmark_env(env),
            cwd=cwd,
        )
    except OSError as exc:
        return None, f"cannot start {argv[0]}: {exc.strerror or exc}"
    _live_groups.add(proc.pid)
    if SHUTDOWN.is_set():  # the stop arrived while it was starting
        _kill_group(proc.pid, signal.SIGKILL)
    return proc, None


def _end_group(proc: subprocess.Popen) -> None:
    """Whatever the leader left running in its group belongs to it: end it, so that no stray process
    outlives it or keeps the pipes (and our reader threads) open; then forget the group."""
    if not _group_gone(proc.pid, 0.0):
        _kill_group(proc.pid, signal.SIGKILL)
        _group_gone(proc.pid, 5.0)
    _live_groups.discard(proc.pid)


def start_service(argv: Sequence[str], env: Mapping[str, str] | None = None):
    """Start a long-lived process (a llama-server) like ``run_process`` starts one, without waiting for
    it: (process, stderr capture, None) or (None, None, why not)."""
    proc, problem = _spawn(tuple(str(a) for a in argv), subprocess.DEVNULL, env)
    if proc is None:
        return None, None, problem
    return proc, Capture(proc.stderr, STDERR_HEAD, STDERR_TAIL), None


def stop_service(proc: subprocess.Popen) -> None:
    """End a process from ``start_service`` and everything in its group."""
    _terminate(proc)
    _end_group(proc)
    if proc.stderr is not None:
        proc.stderr.close()


def group_members(pgid: int) -> list[int]:
    """Live pids whose process group is ``pgid`` (Linux /proc); used to prove nothing survived."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        # fields after "comm)": state, ppid, pgrp, ...; zombies are already dead
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def describe_exit(rc: int | None) -> str:
    """How a process ended, in words: "exited 1", "was killed by SIGILL", "did not start"."""
    if rc is None:
        return "did not start"
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited {rc}"
