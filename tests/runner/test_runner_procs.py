"""Process control for llama.cpp runs: time limits and cancellation end the whole process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.llama import binaries as llamacpp
from runner.llama.binaries import GenParams
from runner.llama.procs import group_members, run_process
from tests.needs import missing


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def long_generation(smollm2_path) -> list[str]:
    """llama-completion asked for far more tokens than a second allows, wrapped in a shell that
    prints the child's pid: the child is what a group kill must reach."""
    try:
        caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.COMPLETION))
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    argv = llamacpp.plain_argv(caps, smollm2_path, "Once upon a time", GenParams(100_000, ctx_size=4096))
    argv.append("--ignore-eos")
    return ["/bin/sh", "-c", '"$0" "$@" & echo $!; wait', *argv]


def _child_pid(stdout: str) -> int:
    return int(stdout.split()[0])


@pytest.mark.llama
def test_timeout_kills_the_whole_group(long_generation):
    start = time.monotonic()
    res = run_process(long_generation, timeout_s=1.0)
    assert res.timed_out and not res.cancelled and res.state == "timeout" and not res.ok
    assert time.monotonic() - start < 30  # does not hang: 100,000 tokens would take many minutes
    assert group_members(res.pid) == []
    assert not _alive(_child_pid(res.stdout))


@pytest.mark.llama
def test_cancel_callback_kills_the_whole_group(long_generation):
    start = time.monotonic()
    answers: list[bool] = []

    def should_cancel() -> bool:
        answers.append(time.monotonic() - start > 1.0)
        return answers[-1]

    res = run_process(long_generation, timeout_s=60, should_cancel=should_cancel, poll_s=0.2)
    assert res.cancelled and not res.timed_out and res.state == "cancelled"
    assert res.wall_s >= 1.0 and len(answers) >= 3  # polled while it ran, every 0.2 s
    assert answers.count(True) == 1 and answers[-1]  # stopped at the first poll that said cancel, asked no more
    assert res.wall_s < 30  # does not hang: 100,000 tokens would take many minutes
    assert group_members(res.pid) == []
    assert not _alive(_child_pid(res.stdout))


def test_sigterm_ignored_escalates_to_sigkill():
    res = run_process(["/bin/sh", "-c", 'trap "" TERM; sleep 30 & echo $!; wait'], timeout_s=0.5)
    assert res.timed_out and res.rc == -signal.SIGKILL  # the SIGTERM it ignored, then the SIGKILL
    assert res.wall_s < 20  # the kill, not the 30 s sleep
    assert group_members(res.pid) == []
    assert not _alive(_child_pid(res.stdout))


def test_captures_output_and_exit_status():
    res = run_process(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], timeout_s=30
    )
    assert (res.rc, res.stdout, res.stderr, res.state) == (3, "out\n", "err\n", "failed")


def test_stderr_is_bounded_but_keeps_head_and_tail():
    code = "import sys; sys.stderr.write('HEAD' + 'x' * 3_000_000 + 'TAIL')"
    res = run_process([sys.executable, "-c", code], timeout_s=30)
    assert res.ok and res.stderr_truncated
    assert res.stderr.startswith("HEAD") and res.stderr.endswith("TAIL") and len(res.stderr) < 1_200_000


def test_missing_program_is_a_state_not_an_exception(tmp_path):
    res = run_process([str(tmp_path / "nope")], timeout_s=5)
    assert res.state == "not-started" and res.rc is None and "cannot start" in res.start_error


def test_grandchild_holding_the_pipes_does_not_hang():
    # the leader exits at once; the background sleep keeps stdout open
    res = run_process(["/bin/sh", "-c", "sleep 30 & echo started"], timeout_s=10)
    assert res.rc == 0 and not res.timed_out  # done when the leader exited, not at the 10 s time-out
    assert group_members(res.pid) == []
    assert os.getpgid(os.getpid()) != res.pid


def test_llama_arg_variables_never_reach_a_benchmark_process(monkeypatch):
    # LLAMA_ARG_SPEC_TYPE=ngram-mod in a user's shell would make the plain baseline speculate.
    monkeypatch.setenv("LLAMA_ARG_SPEC_TYPE", "ngram-mod")
    monkeypatch.setenv("LLAMA_ARG_MODEL_DRAFT", "/tmp/x.gguf")
    monkeypatch.setenv("SPECREG_KEEP", "yes")
    res = run_process(["/usr/bin/env"], timeout_s=10)
    assert "LLAMA_ARG_" not in res.stdout and "SPECREG_KEEP=yes" in res.stdout
    given = run_process(["/usr/bin/env"], timeout_s=10, env={"LLAMA_ARG_THREADS": "1", "A": "b"})
    assert given.stdout.split() == ["A=b"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminated_script_takes_its_services_with_it(sig):
    # A benchmark script starts llama-server in a process group of its own: a signal to the script's group misses it.
    script = (
        "import sys, time\n"
        "from runner.llama import procs\n"
        "procs.stop_on_termination()\n"
        "proc, _, problem = procs.start_service(['sleep', '60'])\n"
        "print(proc.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=root) as script_proc:
        service = int(script_proc.stdout.readline())
        assert _alive(service)
        script_proc.send_signal(sig)
        assert script_proc.wait(timeout=20) == -sig  # it still ends the way the signal ends it
    deadline = time.monotonic() + 10
    while group_members(service) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(service) == []
