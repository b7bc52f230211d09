"""Measure one benchmark cell with llama.cpp's command-line tools: alternated plain (``llama-completion``) and
speculative (``llama-speculative-simple``) runs; the data types and the A/B loop live in ``cells``."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.llama import binaries, output, procs
from runner.measure.cells import (
    BUSY_SHARE,
    Cancel,
    Cell,
    CellResult,
    Divergence,
    Progress,
    Run,
    Spread,
    compare_texts,
    context_size,
    interleave,
    killed_by,
    other_cpu_share,
    summarize,
)
from runner.measure.load import measure_under_load
from runner.measure.server import measure_via_server
from runner.state import checkpointed

__all__ = [
    "BUSY_SHARE",
    "Cancel",
    "Cell",
    "CellResult",
    "Divergence",
    "Progress",
    "Run",
    "Spread",
    "compare_texts",
    "context_size",
    "measure_cell",
    "other_cpu_share",
    "summarize",
]


def _gen(cell: Cell) -> binaries.GenParams:
    return binaries.GenParams(
        cell.n_predict, cell.temperature, cell.seed, cell.threads, cell.gpu_layers, context_size(cell)
    )


def _execute(argv: list[str], cell: Cell, cancel: Cancel | None, parser: Callable[[procs.ProcResult], Any]):
    """Run and parse; a failure that llama.cpp did not explain is run again (at most twice) to learn why:
    its logger is asynchronous and drops the last lines when a process fails at once, as a bad load does."""
    for _ in range(3):
        res = procs.run_process(argv, timeout_s=cell.timeout_s, should_cancel=cancel)
        if res.state not in ("ok", "failed"):
            return res, None
        fig = parser(res)
        if not isinstance(fig, output.RunFailure) or fig.detailed or res.rc == 0:
            break
    return res, fig


def _run(
    kind: str,
    argv: list[str],
    parser: Callable[[procs.ProcResult], Any],
    cell: Cell,
    i: int,
    r: int,
    cancel: Cancel | None,
) -> tuple[Run | None, Any, procs.ProcResult]:
    """Run one process of ``kind`` ("plain" or "spec"); the failed ``Run`` when it failed, else its parsed figures."""
    res, fig = _execute(argv, cell, cancel, parser)
    if fig is None:
        return Run(kind, i, r, res.state, res.wall_s, 0.0, error=_not_ok(_WHAT[kind], res, cell)), None, res
    if isinstance(fig, output.RunFailure):
        state = "failed" if res.rc else "parse-error"
        return Run(kind, i, r, state, res.wall_s, 0.0, error=fig.message, signal=killed_by(res.rc)), None, res
    return None, fig, res


_WHAT = {"plain": "plain", "spec": "speculative"}  # how a failure message names each kind of run


def _run_plain(cell: Cell, caps: binaries.Capabilities, i: int, r: int, cancel: Cancel | None) -> Run:
    argv = binaries.plain_argv(caps, cell.target, cell.prompts[i], _gen(cell))
    failed, fig, res = _run(
        "plain", argv, lambda p: output.parse_completion(p.rc, p.stdout, p.stderr), cell, i, r, cancel
    )
    if failed is not None:
        return failed
    busy_s = (fig.eval_ms + fig.prompt_ms) / 1000
    return Run("plain", i, r, "ok", res.wall_s, busy_s, fig.tokens_per_s, fig.n_eval + 1, text=fig.text)


def _run_spec(cell: Cell, caps: binaries.Capabilities, i: int, r: int, cancel: Cancel | None) -> Run:
    # A checkpointed target's printed totals count the tokens passed again after each restore: the rounds are
    # counted from the debug log instead (output.counted_rounds).
    argv = binaries.method_argv(
        caps,
        cell.target,
        cell.draft or None,
        cell.prompts[i],
        _gen(cell),
        cell.setting,
        round_log=checkpointed(cell.target, "target", cell.method),
    )
    prompt = cell.prompts[i]

    def parse(p: procs.ProcResult) -> Any:
        return output.parse_speculative(p.rc, p.stdout, p.stderr, prompt)

    failed, fig, res = _run("spec", argv, parse, cell, i, r, cancel)
    if failed is not None:
        return failed
    busy_s = fig.decode_s + fig.encode_s
    return Run(
        "spec", i, r, "ok", res.wall_s, busy_s, fig.tokens_per_s, fig.n_decoded,
        fig.n_drafted, fig.n_accept, fig.draft_gen_ms, fig.text,
    )  # fmt: skip


def _not_ok(what: str, res: procs.ProcResult, cell: Cell) -> str:
    if res.state == "timeout":
        return f"{what} run exceeded the {cell.timeout_s:g} s limit and was stopped"
    if res.state == "cancelled":
        return f"{what} run cancelled"
    return res.start_error or f"{what} run did not complete"


def measure_cell(
    cell: Cell,
    *,
    plain_caps: binaries.Capabilities | None = None,
    spec_caps: binaries.Capabilities | None = None,
    server_caps: binaries.Capabilities | None = None,
    progress: Progress | None = None,
    should_cancel: Cancel | None = None,
) -> CellResult:
    """Run the cell through the command-line tools, or (``cell.via == "server"``) two llama-servers."""
    start = time.monotonic()
    for path in (cell.target, cell.draft):
        if path and not Path(path).is_file():
            return summarize(cell, [], "failed", f"model file not found: {path}", 0.0)
    if cell.via == "server":
        try:
            caps = server_caps or binaries.capabilities(binaries.find_binary(binaries.SERVER))
        except (binaries.LlamaCppNotFound, binaries.LlamaCppError) as exc:
            return summarize(cell, [], "failed", str(exc), time.monotonic() - start)
        if cell.clients > 1:
            return measure_under_load(cell, caps, progress=progress, should_cancel=should_cancel)
        return measure_via_server(cell, caps, progress=progress, should_cancel=should_cancel)
    try:
        plain_caps = plain_caps or binaries.capabilities(binaries.find_binary(binaries.COMPLETION))
        spec_caps = spec_caps or binaries.capabilities(binaries.find_binary(binaries.SPECULATIVE))
    except (binaries.LlamaCppNotFound, binaries.LlamaCppError) as exc:
        return summarize(cell, [], "failed", str(exc), time.monotonic() - start)
    caps_of = {"plain": plain_caps, "spec": spec_caps}
    label = f"{cell.setting.label} t={cell.temperature:g}" + (f" {cell.content_type}" if cell.content_type else "")

    def run_one(kind: str, i: int, r: int) -> Run:
        try:
            return (_run_plain if kind == "plain" else _run_spec)(cell, caps_of[kind], i, r, should_cancel)
        except binaries.LlamaCppError as exc:  # this build lacks a needed option
            return Run(kind, i, r, "failed", 0.0, 0.0, error=str(exc))

    return interleave(
        cell, run_one, what="run", label=label, progress=progress, should_cancel=should_cancel, start=start
    )
