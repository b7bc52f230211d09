"""What a Celery worker process does when it starts and stops (connected from ``runner.celery``).

- It records itself and its queues every few seconds (``WorkerPresence``), so a client can tell
  that no worker listens on a queue instead of waiting forever.
- On SIGTERM/SIGINT it kills the llama.cpp processes of the running benchmark at once and the run
  ends as cancelled, saying why. Celery's warm shutdown alone would wait for the task to finish,
  which can take an hour; systemd, Docker and Kubernetes give about 10 s.
"""

from __future__ import annotations

import signal
import threading

from celery import signals
from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from runner.llama import procs
from runner.runs.queues import local_hardware_class

BEAT_S = 10
_stop = threading.Event()


def _presence_loop(name: str, queues: list[str], hardware: str) -> None:
    # Imported when the worker runs, not at the top: Celery imports this module (runner.celery) before Django has
    # loaded its apps, and a model cannot be imported then.
    from runner.models import WorkerPresence

    while True:
        try:
            WorkerPresence.objects.update_or_create(
                name=name, defaults={"queues": queues, "hardware_class": hardware, "seen_at": timezone.now()}
            )
        except DatabaseError:
            pass  # the database is busy or away for a moment: the next beat tries again
        finally:
            close_old_connections()
        if _stop.wait(BEAT_S):
            return


@signals.worker_ready.connect
def _worker_ready(sender=None, **kwargs) -> None:
    app = sender.app
    queues = sorted(app.amqp.queues.consume_from or app.amqp.queues)
    threading.Thread(
        target=_presence_loop,
        args=(sender.hostname, queues, local_hardware_class()),
        daemon=True,
        name="specreg-presence",
    ).start()


@signals.worker_shutting_down.connect
def _worker_shutting_down(**kwargs) -> None:
    # Runs inside the signal handler of the worker's main process (where the solo pool runs tasks):
    # no database work here, only killing process groups and setting flags.
    _stop.set()
    procs.stop_all()


@signals.worker_process_init.connect
def _pool_child_init(**kwargs) -> None:
    # A prefork pool child runs the task; when the whole process group gets SIGTERM (systemd's
    # default), the child must also stop its llama.cpp processes instead of dying without them.
    def on_term(signum, frame) -> None:
        procs.stop_all()

    signal.signal(signal.SIGTERM, on_term)


@signals.worker_shutdown.connect
def _worker_shutdown(sender=None, **kwargs) -> None:
    from runner.models import WorkerPresence  # as in _presence_loop: not importable before the apps are loaded

    _stop.set()
    try:
        WorkerPresence.objects.filter(name=getattr(sender, "hostname", "")).delete()
    except DatabaseError:
        pass
