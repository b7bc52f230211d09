"""Benchmarks queued through a real broker to a real Celery worker running real llama.cpp."""

from __future__ import annotations

import os

import pytest

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkRun
from registry.results.figures import figures_for
from registry.results.recommend import recommend
from runner.runs import records as runs
from runner.runs import submit
from runner.runs.execute import execute
from tests.near_miss import rewrite
from tests.worker import wait_for

pytestmark = [pytest.mark.broker, pytest.mark.llama]

QUICK = {
    "ks": [4],
    "extend": False,
    "content_types": ["json"],
    "repeats": 1,
    "n_predict": 32,
    "prompts_per_type": 1,
    "p_min": 0.0,
}


def queue(target, draft, **params):
    pair = pair_for(register_source(str(target)).file, register_source(str(draft)).file)
    return submit.queue_benchmark(pair, {**QUICK, **params}, hardware="cpu-test")


def finished(run_id):
    run = BenchmarkRun.objects.get(pk=run_id)
    return run if run.finished else None


def llama_processes() -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].decode()
            except OSError:
                continue
            # llama.cpp's programs, and the replay tool a benchmark's prediction runs first
            if os.path.basename(cmd).startswith(("llama-", "specreg-replay")):
                out.append(cmd)
    return out


def test_a_worker_benchmarks_smollm2_drafting_for_itself(celery_worker_process, smollm2_path):
    run = queue(smollm2_path, smollm2_path)
    run = wait_for(lambda: finished(run.pk), 240, "the benchmark to finish", celery_worker_process)
    assert run.status == "done", run.error + run.log
    (result,) = run.results.all()
    assert result.speculation_ran and result.drafted > 0
    assert result.acceptance >= 0.9
    # At temperature 0 with the model drafting for itself the text matches the plain run's here;
    # on some prompts llama.cpp's batched verification diverges (reported, see test_measure).
    assert result.identical is True, result.divergences
    assert result.speedup == pytest.approx(result.tokens_per_second / result.baseline_tokens_per_second)
    assert run.build["label"].startswith("b") and run.hardware["cpu_cores"] >= 1
    assert "llama-server" in run.server_command and "[Service]" in run.systemd_unit
    run.pair.refresh_from_db()
    assert run.pair.best_kind == "measured" and run.pair.best_k == 4
    # The pair page recommends exactly the command the run page offers (when speculation paid off).
    rec = recommend(run.pair.target, run.pair.draft, True, figures_for([run.pair.pk])[run.pair.pk]["measured"], [])
    if rec.use_draft:
        assert rec.command == run.server_command


def test_cancelling_a_running_benchmark_kills_llama_cpp(celery_worker_process, smollm2_path):
    run = queue(smollm2_path, smollm2_path, ks=[2, 4, 8], n_predict=2048, repeats=3, prompts_per_type=3)
    wait_for(
        lambda: BenchmarkRun.objects.get(pk=run.pk).status == "running", 60, "the run to start", celery_worker_process
    )
    wait_for(llama_processes, 60, "llama.cpp to start")
    assert runs.cancel(run.pk) == "cancelling"
    run = wait_for(lambda: finished(run.pk), 60, "the cancel to take effect", celery_worker_process)
    assert run.status == "cancelled"
    wait_for(lambda: not llama_processes(), 15, "llama.cpp processes to go")


def test_a_queued_benchmark_cancels_at_once(transactional_db, smollm2_path, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    run = queue(smollm2_path, smollm2_path)
    assert runs.cancel(run.pk) == "cancelled"
    assert execute(run.pk) == "cancelled"  # a late delivery does nothing


def test_llama_cpp_failing_on_a_broken_model_fails_the_run(celery_worker_process, smollm2_path, tmp_path):
    # Whole and loadable by its header's account (a file cut short is refused before queueing), but without a key
    # llama.cpp's loader requires: llama.cpp itself fails.
    broken = rewrite(smollm2_path, tmp_path / "broken.gguf", data=True, drop=("llama.block_count",))
    run = queue(broken, broken)
    run = wait_for(lambda: finished(run.pk), 120, "the run to fail", celery_worker_process)
    assert run.status == "failed"
    assert run.error and "\n" not in run.error
    assert "llama" in run.log.lower()


def test_a_timeout_kills_the_process_and_fails_the_run(celery_worker_process, smollm2_path):
    endless = {
        "name": "endless",
        "tasks": [
            {"id": "count", "content_type": "code", "prompt": "Count from 1 to 100000, one number per line, no words."}
        ],
    }
    run = queue(smollm2_path, smollm2_path, n_predict=4096, timeout_s=2, task_set=endless, content_types=["code"])
    run = wait_for(lambda: finished(run.pk), 120, "the run to time out", celery_worker_process)
    assert run.status == "failed" and "exceeded the 2 s limit and was stopped" in run.error
    wait_for(lambda: not llama_processes(), 15, "llama.cpp processes to go")


def test_a_killed_worker_leaves_a_run_the_sweep_marks_failed(celery_worker_process, smollm2_path):
    run = queue(smollm2_path, smollm2_path, ks=[2, 4, 8], n_predict=2048, repeats=3)
    wait_for(
        lambda: BenchmarkRun.objects.get(pk=run.pk).status == "running", 60, "the run to start", celery_worker_process
    )
    celery_worker_process.kill()
    assert runs.sweep_stale(stale_after_s=3600) == 0  # still fresh: left alone
    wait_for(lambda: runs.sweep_stale(stale_after_s=2), 30, "the sweep to mark the run")
    run.refresh_from_db()
    assert run.status == "failed" and "stopped responding" in run.error


def test_a_run_executes_once_however_often_its_task_arrives(transactional_db, smollm2_path, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    run = queue(smollm2_path, smollm2_path)
    assert runs.claim(run.pk)
    assert not runs.claim(run.pk)
    assert execute(run.pk) == "running"  # the second delivery returns without running
