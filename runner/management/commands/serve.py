"""serve: run the web server (gunicorn) and a Celery worker with its beat, until Ctrl-C."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings

from inspector.cli import SpecregCommand
from runner.queues import worker_queues


class Command(SpecregCommand):
    help = "Start the web server and one Celery worker (with the periodic sweep) on the configured database and broker."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="web server only (workers run elsewhere)")

    def handle(self, *args, host: str, port: int, no_worker: bool, **options) -> None:
        procs: list[subprocess.Popen] = []
        bin_dir = os.path.dirname(sys.executable)
        if not no_worker:
            schedule = settings.DATA_DIR / "celerybeat-schedule"
            procs.append(subprocess.Popen([
                os.path.join(bin_dir, "celery"), "-A", "runner", "worker", "--beat", "--schedule", str(schedule),
                "--concurrency", "1", "--loglevel", "INFO", "-Q", ",".join(worker_queues()),
            ]))
        procs.append(subprocess.Popen([
            os.path.join(bin_dir, "gunicorn"), "registry.wsgi", "--bind", f"{host}:{port}",
            "--workers", os.environ.get("WEB_CONCURRENCY", "3"), "--access-logfile", "-",
        ]))
        self.stdout.write(f"specreg is running at http://{host}:{port}/  (Ctrl-C stops it)")
        self.stdout.flush()
        try:
            while all(p.poll() is None for p in procs):
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
