"""Soaks: the recommended llama-server setting under a loop of requests, recorded every interval, with
real llama.cpp and SmolLM2-135M drafting for itself; a crash, a server that stops answering and a stopped worker
each end it with their verdict and the record kept."""

from __future__ import annotations

import os
import signal
import threading
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from inspector.management.base import UserError
from inspector.spec_flags import Setting
from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkRun, StabilityResult
from runner.llama import binaries as llamacpp
from runner.llama import procs
from runner.prompts import load_task_set
from runner.runs.execute_soak import soak_prompts
from runner.soak.loop import SoakConfig, SoakRecord, duration_text, run_soak
from runner.soak.targets import parse_duration
from tests.needs import missing

PROMPTS = ("Count from 1 to 40: 1, 2, 3, 4, 5,", "Count down from 50: 50, 49, 48, 47,")


@pytest.fixture(scope="module")
def caps(smollm2_path):
    try:
        return llamacpp.capabilities(llamacpp.find_binary(llamacpp.SERVER))
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))


def _config(model: str, **kw) -> SoakConfig:
    base = {"duration_s": 60.0, "interval_s": 5.0, "n_predict": 32, "request_timeout_s": 4.0}
    return SoakConfig(model, model, Setting("draft-simple", 4), PROMPTS, **{**base, **kw})


def _server_pid() -> int:
    (pgid,) = procs._live_groups  # the plain server is stopped before the soak: only the soaked one is left
    return pgid


@pytest.mark.llama
@pytest.mark.django_db(transaction=True)
def test_a_60_second_soak_records_its_intervals_and_a_stable_verdict(smollm2_path, caps):
    f = register_source(str(smollm2_path)).file
    pair = pair_for(f, f)
    out = StringIO()
    call_command(
        "soak", f"pair:{pair.pk}", "--duration", "60s", "--interval", "15s", "--method", "draft-simple", "--k", "4",
        "--n-predict", "48", "--here", stdout=out,
    )  # fmt: skip
    run = BenchmarkRun.objects.get()
    assert run.status == "done" and run.params["mode"] == "soak", run.error
    s = StabilityResult.objects.get(run=run)
    assert s.status == "stable" and s.verdict.startswith("stable for 60 s at 1 client: 0 errors, memory ")
    assert [round(iv["t"] / 15) for iv in s.intervals] == [1, 2, 3, 4]  # one record every 15 s
    # What a soak promises: a record every interval with the server's memory, and the requests of the whole soak.
    # Not that every 15-second interval finishes a request: on a loaded machine one may not (a request can take
    # longer than an interval), and that is no instability.
    assert all(iv["rss_mb"] > 10 for iv in s.intervals) and s.requests > 0, s.intervals
    assert all(iv["tokens_per_second"] > 0 for iv in s.intervals if iv["requests"]), s.intervals
    assert s.requests == sum(iv["requests"] for iv in s.intervals) and s.errors == 0 and s.timeouts == 0
    assert s.acceptance_min >= 0.5 and s.acceptance is not None  # SmolLM2 drafting for itself
    assert 0 < s.compared <= s.requests  # one client: outputs of the first prompts against the plain ones before
    assert s.baseline_tokens_per_second > 0 and s.rss_start_mb and s.rss_end_mb
    # Labelled when the loop came round to a prompt again: on a quiet machine 60 s outlasts the task set, on a loaded
    # one it may not, and then nothing repeated (the label is the promise, not the machine's speed).
    n_prompts = len(soak_prompts(load_task_set(), str(smollm2_path)))
    assert s.prompt_repeats or s.requests <= n_prompts, (s.requests, n_prompts)
    assert f"soak stable: {s.verdict}" in out.getvalue()
    client = Client()
    page = client.get(pair.get_absolute_url()).content.decode()
    assert 'id="stability"' in page and "stable for 60 s" in page and "<svg" in page
    api = client.get(f"/api/pairs/{pair.pk}").json()
    assert api["stability"][0]["status"] == "stable" and len(api["stability"][0]["intervals"]) == 4
    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="soak-intervals"' in run_page and "occupies its worker" in run_page


@pytest.mark.llama
def test_a_server_killed_mid_soak_fails_it_with_the_time_and_the_last_interval_kept(smollm2_path, caps):
    seen: list[int] = []

    def kill_after_first(record: SoakRecord) -> None:
        if not seen:
            seen.append(len(record.intervals))
            os.killpg(_server_pid(), signal.SIGKILL)

    start = time.monotonic()
    rec = run_soak(_config(str(smollm2_path)), caps, on_interval=kill_after_first)
    assert time.monotonic() - start < 30
    assert rec.status == "failed" and rec.verdict.startswith("failed after ") and "killed by signal 9" in rec.verdict
    assert len(rec.intervals) >= 2 and rec.intervals[0].requests > 0  # the intervals before, and the last one
    # A dead server costs each client one failed request, not one per try until the loop polls again.
    assert rec.intervals[-1].errors <= _config(str(smollm2_path)).clients
    assert 5 <= rec.elapsed_s < 15 and "\n" not in rec.verdict
    assert not procs._live_groups


@pytest.mark.llama
def test_a_server_that_stops_answering_times_out_instead_of_hanging(smollm2_path, caps):
    stopped: list[int] = []

    def freeze(record: SoakRecord) -> None:
        if not stopped:
            stopped.append(_server_pid())
            os.killpg(stopped[0], signal.SIGSTOP)

    start = time.monotonic()
    try:
        rec = run_soak(_config(str(smollm2_path)), caps, on_interval=freeze)
    finally:
        for pgid in stopped:
            try:
                os.killpg(pgid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    assert time.monotonic() - start < 40  # the 4 s limit per request, not the 60 s soak nor a hang
    assert rec.status == "timeout" and rec.verdict.startswith("timed out after ")
    assert "answered no request for" in rec.verdict and rec.intervals[0].requests > 0
    assert not procs._live_groups


@pytest.mark.llama
def test_a_stopped_worker_interrupts_the_soak_and_keeps_the_partial_record(smollm2_path, caps):
    def sigterm(record: SoakRecord) -> None:
        procs.stop_all()  # what serve's SIGTERM handler does: every llama.cpp process is killed

    try:
        rec = run_soak(_config(str(smollm2_path)), caps, on_interval=sigterm)
    finally:
        procs.SHUTDOWN.clear()
    assert rec.status == "interrupted" and "SIGTERM" in rec.verdict and "partial record is kept" in rec.verdict
    assert rec.intervals and rec.intervals[0].requests > 0 and rec.elapsed_s < 30
    assert sum(iv.errors for iv in rec.intervals) == 0  # requests the stop cut short are not the server's errors


@pytest.mark.llama
def test_cancelling_a_soak_keeps_what_it_recorded(smollm2_path, caps):
    flag = threading.Event()
    rec = run_soak(_config(str(smollm2_path)), caps, on_interval=lambda r: flag.set(), should_cancel=flag.is_set)
    assert rec.status == "cancelled" and rec.intervals and rec.elapsed_s < 30


def test_durations_read_and_written():
    assert parse_duration("90") == 90 and parse_duration("30m") == 1800 and parse_duration("1.5h") == 5400
    assert duration_text(60) == "60 s" and duration_text(720) == "12 min" and duration_text(8 * 3600) == "8 h"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--clients", "0"], "clients must be between 1 and 16; got 0"),
        (["--duration", "0"], "a soak lasts more than 0 s and at most 24 h"),
        (["--duration", "25h"], "a soak lasts more than 0 s and at most 24 h"),
        (["--duration", "soon"], "duration 'soon' is not one: write 90s, 30m or 1h"),
        (["--duration", "3s"], "a soak records at most every 5 s"),
    ],
)
def test_bad_soak_input_gets_one_line(smollm2_path, args, message):
    f = register_source(str(smollm2_path)).file
    pair = pair_for(f, f)
    with pytest.raises(UserError) as err:
        call_command("soak", str(pair.pk), "--method", "draft-simple", *args, stdout=StringIO())
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert not BenchmarkRun.objects.exists()


@pytest.mark.django_db
def test_unknown_pairs_and_pairs_without_a_measured_gain_are_refused_in_one_line(smollm2_path):
    for ref, message in [
        ("999", "no pair 999"),
        ("deployment:7", "no deployment 7"),
        ("model:3", "'model:3' names no pair or deployment: write 12, pair:12 or deployment:3"),
    ]:
        with pytest.raises(UserError) as err:
            call_command("soak", ref, stdout=StringIO())
        assert str(err.value) == message
    f = register_source(str(smollm2_path)).file
    pair = pair_for(f, f)
    with pytest.raises(UserError) as err:
        call_command("soak", f"pair:{pair.pk}", stdout=StringIO())
    assert "has no measured setting faster than the target alone to soak" in str(err.value)
