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
import functools
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
    """The cell at ``cell.clients`` requests at once against a plain and a speculative llama-server."""
    start = time.monotonic()
    kw = ServerSize(ctx_size=context_size(cell), threads=cell.threads, gpu_layers=cell.gpu_layers, parallel=cell.slots)
    p_port, s_port = free_port(), free_port()
    try:
        plain = Server(plain_server_argv(caps, cell.target, p_port, **kw), p_port)
        spec = Server(spec_server_argv(caps, cell.target, cell.draft or None, cell.setting, s_port, **kw), s_port)
    except LlamaCppError as exc:
        return summarize(cell, [], "failed", str(exc), time.monotonic() - start)
    run = _LoadRun(cell, start, cpu_seconds(), should_cancel)
    try:
        problem = plain.start(should_cancel=should_cancel)
        if problem:
            status = "cancelled" if problem == "cancelled" else "failed"
            return run.end(
                status, problem if status == "cancelled" else f"plain llama-server: {problem}", plain.crash_signal
            )
        ended = _single_client_outputs(run, plain)
        if ended is not None:
            return ended
        return _rounds(run, plain, spec, progress)
    finally:
        plain.stop()
        spec.stop()


@dataclasses.dataclass
class _LoadRun:
    """A cell under load as it is measured: its runs, each round's aggregate speed, the single-client outputs."""

    cell: Cell
    start: float
    cpu_before: tuple[float, float] | None
    should_cancel: Cancel | None
    runs: list[Run] = dataclasses.field(default_factory=list)
    aggregates: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {"plain": [], "spec": []})
    refs: dict[int, str] = dataclasses.field(default_factory=dict)  # prompt index: its single-client plain output

    def cancelled(self) -> bool:
        return self.should_cancel is not None and self.should_cancel()

    def end(self, status: str, error: str | None, signal: int | None = None) -> CellResult:
        """The cell's result from what was measured so far."""
        elapsed = time.monotonic() - self.start
        summary = summarize(self.cell, self.runs, status, error, elapsed, self.cpu_before, signal)
        return _with_load(summary, self.aggregates, self.refs)


def _ask(cell: Cell, server: Server, i: int) -> Completion:
    return server.complete(
        cell.prompts[i],
        n_predict=cell.n_predict,
        temperature=cell.temperature,
        seed=cell.seed,
        timeout_s=cell.timeout_s,
        stream=True,
    )


def _single_client_outputs(run: _LoadRun, plain: Server) -> CellResult | None:
    """The single-client plain output of every prompt the rounds send, for the identity report; the cell's result
    when it ends here (cancelled, or a request failed)."""
    cell = run.cell
    used = sorted({i for r in range(cell.repeats) for i in round_prompts(len(cell.prompts), cell.clients, r)})
    for i in used:
        if run.cancelled():
            return run.end("cancelled", "cancelled")
        c = _ask(cell, plain, i)
        if c.state != "ok":
            return run.end("failed" if c.state != "timeout" else "timeout", c.error, plain.crash_signal)
        run.refs[i] = c.text
    return None


def _rounds(run: _LoadRun, plain: Server, spec: Server, progress: Progress | None) -> CellResult:
    """Per repeat, one round per side (plain, then speculative: A B A B), each of ``clients`` requests at once."""
    cell, n = run.cell, run.cell.clients
    label = f"{cell.setting.label} via server, {n} clients" + (f" {cell.content_type}" if cell.content_type else "")
    total = 2 * cell.repeats
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="load-client") as pool:
        for r in range(cell.repeats):
            batch = round_prompts(len(cell.prompts), n, r)
            for kind, server in (("plain", plain), ("spec", spec)):
                if run.cancelled():
                    return run.end("cancelled", "cancelled")
                if kind == "spec":  # a fresh server every round: no n-gram pool from earlier requests
                    spec.stop()
                    problem = spec.start(should_cancel=run.should_cancel)
                    if problem:
                        status = "cancelled" if problem == "cancelled" else "failed"
                        why = problem if status == "cancelled" else f"speculative llama-server: {problem}"
                        return run.end(status, why, spec.crash_signal)
                ended = _round(run, pool, kind, server, batch, r)
                if ended is not None:
                    return ended
                if progress is not None:
                    speed = run.aggregates[kind][-1]
                    progress(len(run.runs) / (total * n), f"{label}: {kind} round {r + 1}: {speed:.1f} t/s")
    return run.end("ok", None)


def _round(
    run: _LoadRun, pool: ThreadPoolExecutor, kind: str, server: Server, batch: list[int], r: int
) -> CellResult | None:
    """One round's requests at once; its runs and aggregate speed kept. The cell's result when a request failed."""
    t0 = time.monotonic()
    done = list(pool.map(functools.partial(_ask, run.cell, server), batch))
    wall = time.monotonic() - t0
    run.runs += [run_of(kind, i, r, c, server) for i, c in zip(batch, done, strict=True)]
    failed = next((c for c in done if c.state != "ok"), None)
    if failed is not None:
        status = failed.state if failed.state in ("timeout", "cancelled") else "failed"
        return run.end(status, failed.error, server.crash_signal)
    run.aggregates[kind].append(sum(c.n_tokens for c in done) / wall if wall > 0 else 0.0)
    return None


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
