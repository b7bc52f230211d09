"""Measuring a cell under load (``run_benchmark --via server --clients 1,2,4``): N requests at once against a plain
and a speculative llama-server of ``-np`` slots, each slot with the context one request gets alone.

Context: ``-c`` is the per-request context times the slots and the KV cache is not unified (llama.cpp's default with
an explicit ``-np``: ``n_ctx_seq = n_ctx / n_seq_max`` in ``src/llama-context.cpp``), so every slot holds exactly
what a single request gets today and the memory is reserved up front, as in the deployed command.

Per repeat, one round per side (plain, then speculative: A B A B): the round's N prompts are distinct, the
speculative server starts afresh for every round (n-gram pools outlive requests: ``server_measure``), and the
round's aggregate speed is all its tokens over its wall time. More clients than the content type's prompts would
send one prompt twice to a server; such a figure is labelled ``prompt_repeats``. Before the rounds every prompt
is sent once alone to the plain server: with several clients, outputs at temperature 0 may change with the
batch's make-up, and the share that differs from that single-client output is reported as information.
"""

from __future__ import annotations

import dataclasses
import math
import time
from concurrent.futures import ThreadPoolExecutor

from inspector.llama_flags import Capabilities, LlamaCppError
from runner.measure.cells import (
    Cancel,
    Cell,
    CellResult,
    LoadFigures,
    Progress,
    Run,
    Spread,
    context_size,
    cpu_seconds,
    divergence,
    summarize,
)
from runner.measure.server import (
    Completion,
    Server,
    ServerSize,
    free_port,
    plain_server_argv,
    run_of,
    spec_server_argv,
)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100): a value that was measured, not an interpolation between two."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def round_prompts(n_prompts: int, clients: int, repeat: int) -> list[int]:
    """The prompts of one round: consecutive ones through the list, so rounds differ while prompts last."""
    return [(repeat * clients + j) % n_prompts for j in range(clients)]


def measure_under_load(
    cell: Cell, caps: Capabilities, *, progress: Progress | None = None, should_cancel: Cancel | None = None
) -> CellResult:

    start = time.monotonic()
    n = cell.clients
    kw = ServerSize(ctx_size=context_size(cell), threads=cell.threads, gpu_layers=cell.gpu_layers, parallel=cell.slots)
    p_port, s_port = free_port(), free_port()
    try:
        plain = Server(plain_server_argv(caps, cell.target, p_port, **kw), p_port)
        spec = Server(spec_server_argv(caps, cell.target, cell.draft or None, cell.setting, s_port, **kw), s_port)
    except LlamaCppError as exc:
        return summarize(cell, [], "failed", str(exc), time.monotonic() - start)
    cancelled = should_cancel or (lambda: False)
    runs: list[Run] = []
    aggregates: dict[str, list[float]] = {"plain": [], "spec": []}
    refs: dict[int, str] = {}
    cpu_before = cpu_seconds()
    label = f"{cell.setting.label} via server, {n} clients" + (f" {cell.content_type}" if cell.content_type else "")

    def ask(server: Server, i: int) -> Completion:
        return server.complete(
            cell.prompts[i],
            n_predict=cell.n_predict,
            temperature=cell.temperature,
            seed=cell.seed,
            timeout_s=cell.timeout_s,
            stream=True,
        )

    def end(status: str, error: str | None, signal: int | None = None) -> CellResult:
        return _with_load(
            summarize(cell, runs, status, error, time.monotonic() - start, cpu_before, signal),
            aggregates,
            refs,
        )

    try:
        problem = plain.start(should_cancel=should_cancel)
        if problem:
            status = "cancelled" if problem == "cancelled" else "failed"
            return end(
                status, problem if status == "cancelled" else f"plain llama-server: {problem}", plain.crash_signal
            )
        used = sorted({i for r in range(cell.repeats) for i in round_prompts(len(cell.prompts), n, r)})
        for i in used:  # the single-client plain output of every prompt, for the identity report
            if cancelled():
                return end("cancelled", "cancelled")
            c = ask(plain, i)
            if c.state != "ok":
                return end("failed" if c.state != "timeout" else "timeout", c.error, plain.crash_signal)
            refs[i] = c.text
        total = 2 * cell.repeats
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="load-client") as pool:
            for r in range(cell.repeats):
                batch = round_prompts(len(cell.prompts), n, r)
                for kind, server in (("plain", plain), ("spec", spec)):
                    if cancelled():
                        return end("cancelled", "cancelled")
                    if kind == "spec":  # a fresh server every round: no n-gram pool from earlier requests
                        spec.stop()
                        problem = spec.start(should_cancel=should_cancel)
                        if problem:
                            status = "cancelled" if problem == "cancelled" else "failed"
                            why = problem if status == "cancelled" else f"speculative llama-server: {problem}"
                            return end(status, why, spec.crash_signal)
                    t0 = time.monotonic()
                    done = list(pool.map(lambda i, s=server: ask(s, i), batch))
                    wall = time.monotonic() - t0
                    runs += [run_of(kind, i, r, c, server) for i, c in zip(batch, done, strict=True)]
                    failed = next((c for c in done if c.state != "ok"), None)
                    if failed is not None:
                        status = failed.state if failed.state in ("timeout", "cancelled") else "failed"
                        return end(status, failed.error, server.crash_signal)
                    aggregates[kind].append(sum(c.n_tokens for c in done) / wall if wall > 0 else 0.0)
                    if progress is not None:
                        progress(
                            len(runs) / (total * n), f"{label}: {kind} round {r + 1}: {aggregates[kind][-1]:.1f} t/s"
                        )
        return end("ok", None)
    finally:
        plain.stop()
        spec.stop()


def _with_load(result: CellResult, aggregates: dict[str, list[float]], refs: dict[int, str]) -> CellResult:
    """The cell's summary with the figures of load: speeds are aggregates, the speedup is against the plain server at
    the same concurrency, identity is not asked for (several clients), and outputs differing from the single-client
    plain output are counted as information."""
    cell = result.cell
    ok = [r for r in result.runs if r.state == "ok"]
    spec_lat = [r.wall_s for r in ok if r.kind == "spec"]
    plain_lat = [r.wall_s for r in ok if r.kind == "plain"]
    ttft = [r.ttft_s for r in ok if r.kind == "spec" and r.ttft_s is not None]
    divergences = []
    for r in ok:
        if r.prompt_index in refs:
            ref = Run("plain", r.prompt_index, r.repeat, "ok", 0.0, 0.0, text=refs[r.prompt_index])
            if (d := divergence(ref, r)) is not None:
                divergences.append(d)
    p_agg, s_agg = Spread.of(aggregates["plain"]), Spread.of(aggregates["spec"])
    speedup = (
        s_agg.median / p_agg.median
        if result.speculation_ran and p_agg and s_agg and p_agg.median > 0 and len(aggregates["spec"])
        else None
    )
    repeats = cell.clients > len(cell.prompts)
    rounds = [sp / pl for pl, sp in zip(aggregates["plain"], aggregates["spec"], strict=False) if pl > 0]
    load = LoadFigures(
        plain_aggregate=p_agg,
        spec_aggregate=s_agg,
        latency_p50=percentile(spec_lat, 50),
        latency_p95=percentile(spec_lat, 95),
        baseline_latency_p95=percentile(plain_lat, 95),
        ttft_p50=percentile(ttft, 50),
        differing_share=len(divergences) / len(ok) if ok and refs else None,
        prompt_repeats=repeats,
    )
    return dataclasses.replace(
        result,
        plain=p_agg,
        spec=s_agg,
        speedup=speedup,
        identical=None,
        divergences=tuple(divergences[:20]),
        load=load,
        pair_speedups=Spread.of(rounds) if result.speculation_ran else None,
    )
