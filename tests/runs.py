"""Benchmark runs as a finished run stores them (results, predictions, recommendations) and a sweep's cell results,
for tests that start from runs rather than run llama.cpp."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkResult, BenchmarkRun, Pair, PredictedResult
from registry.results.figures import refresh_predicted
from runner.measure.cli import Cell, CellResult, Spread


def finished_run(pair: Pair, build: str, hw_class: str, cells: list[tuple], minutes_ago: int) -> BenchmarkRun:
    """A finished run of ``build`` with cells (content, K, median t/s, min, max, speedup)."""
    run = BenchmarkRun.objects.create(
        pair=pair, queue=f"bench.{hw_class}", status="done", hardware_class=hw_class, build={"label": build}
    )
    BenchmarkRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    run.refresh_from_db()
    for content, k, tps, lo, hi, speedup in cells:
        BenchmarkResult.objects.create(
            run=run,
            pair=pair,
            k=k,
            content_type=content,
            n_predict=64,
            repeats=3,
            n_prompts=2,
            status="ok",
            tokens_per_second=tps,
            tps_min=lo,
            tps_max=hi,
            speedup=speedup,
            acceptance=0.6,
            baseline_tokens_per_second=tps / speedup,
            hardware=f"Some CPU ({hw_class})",
            llama_cpp_build=build,
        )
    return run


CMD = (
    "llama-server -m models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -md models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf "
    "--spec-type draft-simple --spec-draft-n-max 4 --spec-draft-n-min 0 --host 127.0.0.1 --port 8080"
)


def recommending_run(pair: Pair) -> BenchmarkRun:
    """A finished run of ``pair`` whose one result (code, K=4) it recommends, with its server command ``CMD``."""
    run = BenchmarkRun.objects.create(
        pair=pair,
        queue="specreg",
        status=BenchmarkRun.DONE,
        server_command=CMD,
        summary={
            "recommendations": [
                {"content_type": "code", "temperature": 0.0, "k": 4, "speedup": 1.3, "reason": "fastest"}
            ]
        },
    )
    BenchmarkResult.objects.create(
        run=run,
        pair=pair,
        k=4,
        content_type="code",
        acceptance=0.77,
        speedup=1.3,
        tokens_per_second=31.0,
        baseline_tokens_per_second=23.8,
        n_predict=64,
        repeats=1,
        n_prompts=1,
        status="ok",
        hardware="test cpu",
        llama_cpp_build="b11434",
    )
    return run


def predict_run(
    pair: Pair, figures: list[tuple[str, int, float | None, float, float]], hw: str = "cpu-2c/avx2"
) -> BenchmarkRun:
    """A prediction run with (method, k, p_min, acceptance, speedup) rows for code."""
    run = BenchmarkRun.objects.create(
        pair=pair, queue="bench.cpu-2c", status="done", kind="predict", params={"mode": "predict"}
    )
    for method, k, p_min, acc, speed in figures:
        PredictedResult.objects.create(
            run=run,
            pair=pair,
            method=method,
            k=k,
            p_min=p_min,
            options=[] if method == "draft-simple" else [["--spec-ngram-mod-n-match", "24"]],
            content_type="code",
            acceptance=acc,
            speedup=speed,
            n_predict=128,
            n_prompts=2,
            task_set="default",
            hardware_class=hw,
            hardware=f"Some CPU ({hw})",
            llama_cpp_build="b11434",
            drafted=100,
            accepted=int(acc * 100),
            tokens=256,
            near_ties=2,
        )
    refresh_predicted(pair)
    return run


def measured(pair: Pair, k: int, speedup: float, clients: int = 1, **run_summary) -> BenchmarkResult:
    run = BenchmarkRun.objects.create(pair=pair, queue="bench.x", status=BenchmarkRun.DONE, summary=run_summary)
    return BenchmarkResult.objects.create(
        run=run, pair=pair, k=k, content_type="code", speedup=speedup, acceptance=0.8, tokens_per_second=30.0,
        baseline_tokens_per_second=25.0, n_predict=64, repeats=1, n_prompts=2, status="ok", clients=clients,
        parallel=clients, hardware="test cpu", llama_cpp_build="b11434",
    )  # fmt: skip


N_MATCH = [["--spec-ngram-mod-n-match", "24"]]


def alone_run(smollm2_path: Path) -> BenchmarkRun:
    """A finished ngram-mod run of SmolLM2 alone, as ``run_benchmark TARGET`` records it: one setting that drafted
    nothing (its speculative process still timed its own decoding, faster than the plain run's) and whose text parted
    from the plain text at a near-tie, and a prediction of that setting that drafted 24 tokens."""
    f = register_source(str(smollm2_path)).file
    pair = pair_for(f, f)
    now = timezone.now()
    run = BenchmarkRun.objects.create(
        pair=pair,
        target_file=f,
        draft_file=f,
        queue="bench.cpu-2c",
        status=BenchmarkRun.DONE,
        started_at=now - timedelta(seconds=75),
        finished_at=now,
        progress=1.0,
        progress_message="prose ngram-mod K=16: spec run 2/2 177.5 t/s",
        summary={"recommendations": [
            {"content_type": "edit", "temperature": 0.0, "k": 16, "speedup": 2.6, "method": "ngram-simple",
             "options": [["--spec-ngram-simple-size-n", "12"]], "reason": "fastest"},
            {"content_type": "prose", "temperature": 0.0, "k": None, "speedup": None, "reason": "nothing drafted"}]},
        params={"target_alone": True, "methods": ["ngram-mod"], "ks": [4, 8, 16], "temperatures": [0.0],
                "repeats": 1, "n_predict": 32, "prompts_per_type": 1},
    )  # fmt: skip
    figures = {"k": 16, "method": "ngram-mod", "options": N_MATCH, "content_type": "prose"}
    BenchmarkResult.objects.create(
        run=run, pair=pair, **figures, temperature=0.0, n_predict=32, repeats=1, n_prompts=1, status="ok",
        speculation_ran=False, drafted=0, accepted=0, speedup=None, acceptance=None,
        baseline_tokens_per_second=101.9, baseline_min=101.9, baseline_max=101.9,
        tokens_per_second=177.5, tps_min=177.5, tps_max=177.5, hardware="test cpu",
        identical=False, divergences=[{"prompt": 0, "repeat": 0, "position": 45, "plain": "total", "spec": "return"}],
    )  # fmt: skip
    PredictedResult.objects.create(
        run=run, pair=pair, **figures, n_predict=32, n_prompts=1, drafted=24, accepted=24, speedup=1.35,
        acceptance=1.0, tokens=32,
    )  # fmt: skip
    return run


def cell_result(
    k: int, speedup: float | None, status: str = "ok", ran: bool = True, pairs: Spread | None = None
) -> CellResult:
    if pairs is None and ran and speedup is not None:  # three interleaved pairs close around the median
        pairs = Spread(speedup, speedup - 0.05, speedup + 0.05, 3)
    return CellResult(
        Cell("t", "d", k, ("p",)),
        status,
        None if status == "ok" else "boom",
        Spread(10, 10, 10, 1),
        Spread(10 * (speedup or 1), 1, 1, 1),
        speedup if ran else None,
        ran,
        8 if ran else 0,
        6 if ran else 0,
        0.75 if ran else None,
        1.5 if ran else None,
        True,
        (),
        1.0,
        1.0,
        1.0,
        pair_speedups=pairs,
    )
