"""serve: run the web server (gunicorn) and four Celery workers, one with the beat, until SIGTERM or Ctrl-C.

Benchmarks take one worker (``--pool solo``: one run at a time, as the measurements need) and may run
for hours; Hub imports and searches, queued checks and the sweep go to the general queue, whose own
worker keeps its beat on time while a benchmark runs. Telemetry scrapes have a queue and a worker of
their own: a scrape may wait on a slow /metrics for its whole deadline, and a visitor's queued check
must not wait behind it. That worker sleeps on sockets, so the CPU stays with the other two. Crawls of the
Hub (import_hf --author/--search) have a fourth, with SPECREG_CRAWL_CONCURRENCY threads: a crawl's tasks
mostly wait on the Hub, and one of thousands of repositories must not hold up the general queue.

Stopping behaves the way systemd, Docker and Kubernetes expect: on SIGTERM or SIGINT both children
get SIGTERM at once (the worker then kills the running benchmark's llama.cpp processes and records
the run as cancelled, saying why), and whatever is still alive after ``STOP_GRACE_S`` is killed
with its whole process group, so serve exits well within Docker's 10 s and leaves no process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from django.conf import settings

from inspector.deadlines import header_deadline_seconds
from inspector.management.base import SpecregCommand
from registry.queues import crawl_queue, telemetry_queue
from runner.runs.queues import bench_queue, local_hardware_class

STOP_GRACE_S = 7.0


def web_timeout_s() -> int:
    """gunicorn kills a request (its worker) that takes longer than this. A check inspects at most two
    remote files (target and draft), each within SPECREG_HEADER_DEADLINE_SECONDS for all its shards
    together (inspector.info shares one deadline), so the request ends with a clear message before
    gunicorn's timeout would end it with a 502."""
    return int(2 * header_deadline_seconds()) + 15


class Command(SpecregCommand):
    help = (
        "Start the web server, a benchmark worker, a telemetry worker and a general worker (with the periodic "
        "tasks) on the configured database and broker."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--host",
            default=os.environ.get("HOST", "127.0.0.1"),
            help="address to listen on (default %(default)s: $HOST)",
        )
        parser.add_argument(
            "--port", type=int, default=int(os.environ.get("PORT", "8000")), help="port (default %(default)s: $PORT)"
        )
        parser.add_argument("--no-worker", action="store_true", help="web server only (workers run elsewhere)")

    def handle(self, *args, host: str, port: int, no_worker: bool, **options) -> None:
        stop = _StopRequest()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, stop.receive)
        bin_dir = os.path.dirname(sys.executable)
        argvs = ([] if no_worker else _worker_argvs(bin_dir)) + [_web_argv(bin_dir, host, port)]
        # Each child leads its own process group, so a stop reaches everything it started.
        procs = [subprocess.Popen(argv, start_new_session=True) for argv in argvs]
        self.stdout.write(f"specreg is running at http://{host}:{port}/  (Ctrl-C or SIGTERM stops it)")
        self.stdout.flush()
        while stop.signum is None and all(p.poll() is None for p in procs):
            time.sleep(0.2)
        why = signal.Signals(stop.signum).name if stop.signum is not None else "a child exited"
        self.stderr.write(f"serve: stopping ({why})")
        stop_all(procs)


@dataclass
class _StopRequest:
    """The first stop signal received (SIGTERM or SIGINT); None while serve runs."""

    signum: int | None = None

    def receive(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum


def _worker_argvs(bin_dir: str) -> list[list[str]]:
    """The four Celery workers: general (with the beat), benchmark, crawl and telemetry."""
    schedule = settings.DATA_DIR / "celerybeat-schedule"
    celery = [os.path.join(bin_dir, "celery"), "-A", "runner", "worker", "--pool", "solo", "--loglevel", "INFO"]
    general = ["-n", "general@%h", "--beat", "--schedule", str(schedule), "-Q", settings.CELERY_TASK_DEFAULT_QUEUE]
    threads = ["--pool", "threads", "--concurrency", str(settings.SPECREG_CRAWL_CONCURRENCY), "--loglevel", "INFO"]
    return [
        celery + general,
        celery + ["-n", "bench@%h", "-Q", bench_queue(local_hardware_class())],
        celery[: celery.index("--pool")] + threads + ["-n", "crawl@%h", "-Q", crawl_queue()],
        celery + ["-n", "telemetry@%h", "-Q", telemetry_queue()],
    ]


def _web_argv(bin_dir: str, host: str, port: int) -> list[str]:
    """gunicorn serving the site."""
    return [
        os.path.join(bin_dir, "gunicorn"),
        "registry.wsgi",
        "--bind",
        f"{host}:{port}",
        "--workers",
        os.environ.get("WEB_CONCURRENCY", "3"),
        "--timeout",
        str(web_timeout_s()),
        "--graceful-timeout",
        "5",
        "--access-logfile",
        "-",
        *_control_socket_args(),
    ]


# A Unix socket's path holds at most 108 bytes on Linux (104 on macOS): past that bind() fails.
MAX_SOCKET_PATH = 100


def _control_socket_args() -> list[str]:
    """gunicorn's control socket (``gunicornc``) inside the data folder, with everything else specreg writes:
    gunicorn's default is ``$XDG_RUNTIME_DIR`` or ``~/.gunicorn/``, outside it. A data folder too deep for a
    socket's path gets none (nothing in specreg uses it) rather than a warning at every start."""
    path = settings.DATA_DIR / "gunicorn.ctl"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return ["--no-control-socket"]
    return ["--control-socket", str(path)]


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each child, then SIGKILL the process group of any still alive after the grace period."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the group: gunicorn's workers, anything left behind
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
