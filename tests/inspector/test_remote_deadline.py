"""Hardening: remote reads overshot their deadline.

A server sending one byte every 29 s kept one file's read going 87 s against a 60 s deadline (each
socket read ended well within its 30 s timeout, and the deadline was looked at only between them); a
two-file check ran 135.5 s (a deadline per file), gunicorn killed the worker and the user got a 500;
and the thread waiting for a dribbled answer kept its socket after the read gave up. Here the fake Hub
drips one byte at a time, and the deadline is a few seconds: every read, one file or two, ends at one
deadline (the watchdog shuts a read blocked past it) with one line, the web answers 504, and no socket to
the dripping server stays open. What is asserted is counted (deadlines made, watchdogs fired), not timed
against a margin a loaded machine can eat; the seconds asserted are only a generous "it does not hang".
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from django.contrib.auth.models import User

from inspector import cli
from inspector.deadlines import Deadline
from inspector.info import InspectError, InspectTimeout, inspect_source
from registry.hub.checking import CheckTimeout, check_sources
from tests.ggufgen import vocab, write_gguf
from tests.hub import needs_proc, settles, sockets_to

DEADLINE = 4.0
TARGET, DRAFT = "hf://owner/target/m.gguf", "hf://owner/draft/m.gguf"
MESSAGE = f"the header was not read within {DEADLINE:g} s (SPECREG_HEADER_DEADLINE_SECONDS); the server is too slow"


@pytest.fixture
def dripping_hub(fake_hub, monkeypatch, tmp_path):
    # The target's file is 128 bytes, the draft's 25 KB: dripped alike, the first is read in time, the second not.
    fake_hub.add_repo("owner/target", {"m.gguf": write_gguf(tmp_path / "t.gguf", model=None, pre=None, hparams=False)})
    fake_hub.add_repo("owner/draft", {"m.gguf": write_gguf(tmp_path / "d.gguf", tokens=vocab(2000))})
    monkeypatch.setenv("SPECREG_HEADER_DEADLINE_SECONDS", f"{DEADLINE:g}")
    # A byte every 3.5 s: below the per-read timeout (what is left of the 4 s), so only the deadline can end it.
    fake_hub.drip_seconds = 3.5
    return fake_hub


@dataclass
class _Deadlines:
    made: int = 0  # Deadline objects: one per check, whatever the number of files
    fired: int = 0  # times a watchdog (its own timer thread) shut a deadline's sockets under a blocked read
    _lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def deadlines(monkeypatch) -> _Deadlines:
    seen = _Deadlines()
    made, shut = Deadline.__init__, Deadline._shut_sockets

    def counted_init(self, *args, **kwargs):
        with seen._lock:
            seen.made += 1
        made(self, *args, **kwargs)

    def counted_shut(self):
        if isinstance(threading.current_thread(), threading.Timer):
            with seen._lock:
                seen.fired += 1
        shut(self)

    monkeypatch.setattr(Deadline, "__init__", counted_init)
    monkeypatch.setattr(Deadline, "_shut_sockets", counted_shut)  # the watchdog's timer looks it up when made
    return seen


def _target_read_in_time(hub) -> None:
    """Drip so that the target's 128 bytes take 2.6 s: the draft's read then has 1.4 s of the deadline left."""
    hub.drip_seconds = 0.02


@needs_proc
def test_one_read_of_a_dripping_body_ends_at_its_deadline(dripping_hub, deadlines):
    started = time.monotonic()
    with pytest.raises(InspectError) as exc:
        inspect_source(TARGET)
    assert time.monotonic() - started > DEADLINE - 0.2  # not before it
    # The read, blocked on a byte due at 7 s, was ended by the watchdog at the deadline: was, it ended only
    # when that byte came (the deadline was looked at between socket reads, never during one).
    assert (deadlines.made, deadlines.fired) == (1, 1)
    assert isinstance(exc.value, InspectTimeout) and str(exc.value) == f"{TARGET}: {MESSAGE}"
    assert sockets_to(dripping_hub.cdn_url) == 0


@needs_proc
def test_a_dripping_status_line_leaves_no_socket_behind(dripping_hub):
    dripping_hub.drip_seconds, dripping_hub.drip_headers = 0.5, True
    started = time.monotonic()
    with pytest.raises(InspectError, match="the header was not read within 4 s") as exc:
        inspect_source(TARGET)
    assert time.monotonic() - started < DEADLINE + 10  # does not hang
    # was: the thread waiting for the answer read on, a byte every 0.5 s, long after the read gave up
    # (the status line and headers alone drip for over a minute)
    assert settles(lambda: sockets_to(dripping_hub.cdn_url) == 0, 10)
    assert settles(lambda: dripping_hub.dripping == 0, 10)  # the server saw the client go
    assert isinstance(exc.value, InspectTimeout)


def test_a_two_file_check_shares_one_deadline_on_the_command_line(dripping_hub, deadlines):
    _target_read_in_time(dripping_hub)
    started = time.monotonic()
    with pytest.raises(cli.UserError) as exc:
        cli.check(TARGET, DRAFT, out=None)
    assert deadlines.made == 1  # was: a deadline per file, 6.6 s here
    assert time.monotonic() - started < DEADLINE + 10  # does not hang
    assert str(exc.value) == f"{DRAFT}: {MESSAGE}"


@pytest.mark.django_db
def test_a_two_file_check_on_the_web_shares_one_deadline(dripping_hub, deadlines):
    _target_read_in_time(dripping_hub)
    started = time.monotonic()
    with pytest.raises(CheckTimeout) as exc:
        check_sources(TARGET, DRAFT, User.objects.create_user("ann", password="x" * 12))
    assert deadlines.made == 1
    assert time.monotonic() - started < DEADLINE + 10  # does not hang
    assert "\n" not in str(exc.value) and MESSAGE in str(exc.value)


@pytest.mark.django_db
@needs_proc
def test_the_web_answers_504_with_one_line(dripping_hub, client, deadlines):
    client.force_login(User.objects.create_user("ann", password="x" * 12))  # signed in: checked in the request
    _target_read_in_time(dripping_hub)
    started = time.monotonic()
    r = client.get("/api/check", {"target": TARGET, "draft": DRAFT})
    # was: a deadline per file, 6.6 s (135 s with the defaults: gunicorn's kill, a 500)
    assert deadlines.made == 1 and time.monotonic() - started < DEADLINE + 10
    assert r.status_code == 504 and r.json() == {"error": f"{DRAFT}: {MESSAGE}"}
    started = time.monotonic()
    page = client.get("/check/", {"target": TARGET, "draft": DRAFT})
    assert deadlines.made == 2 and time.monotonic() - started < DEADLINE + 10  # one more for the page's check
    assert page.status_code == 504 and MESSAGE in page.content.decode()
    assert sockets_to(dripping_hub.cdn_url) == 0
