"""A benchmark cell and what measuring it produced: its runs, spreads, divergences and summary, and the one
loop that alternates plain and speculative runs (A B A B), shared by the command-line tools (``measure``)
and the two llama-servers (``server_measure``)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inspector.spec_flags import Setting
from registry.results.standing import BUSY_SHARE as BUSY_SHARE  # re-exported: runner.measure.cli, the sweep
from runner.llama import procs

Progress = Callable[[float, str], None]
Cancel = Callable[[], bool]


@dataclass(frozen=True)
class Cell:
    """One measurement: a target with one speculation setting (a draft model at K, or a draftless method)
    at one temperature over a few prompts."""

    target: str
    draft: str  # "" for draftless methods (n-gram, the target's own MTP heads)
    k: int  # the method's draft length
    prompts: tuple[str, ...]  # already rendered with the chat template
    temperature: float = 0.0
    p_min: float | None = None  # None leaves llama.cpp's default
    n_predict: int = 128
    repeats: int = 3
    threads: int | None = None
    gpu_layers: int | None = None
    seed: int = 42
    ctx_size: int = 2048
    timeout_s: float = 600.0  # per process
    content_type: str = ""  # a label carried into results
    method: str = "draft-simple"  # llama.cpp's --spec-type
    options: tuple[tuple[str, str], ...] = ()  # the method's other swept options (flag, value)
    via: str = "cli"  # "cli": llama-completion vs llama-speculative-simple; "server": two llama-servers
    clients: int = 1  # requests sent at once (via server only): runner.measure.load
    parallel: int = 0  # the servers' slots (-np); 0: as many as clients

    @property
    def setting(self) -> Setting:
        return Setting(self.method, self.k, self.p_min, self.options)

    @property
    def slots(self) -> int:
        return self.parallel or self.clients


@dataclass(frozen=True)
class Run:
    """One process run of a cell."""

    kind: str  # "plain" or "spec"
    prompt_index: int
    repeat: int
    state: str  # procs.ProcResult.state, or "parse-error"
    wall_s: float  # the process from start to exit (model load included)
    llama_s: float  # what llama.cpp itself timed (prompt + generation)
    tokens_per_s: float | None = None
    n_tokens: int = 0
    n_drafted: int = 0
    n_accept: int = 0
    draft_gen_ms: float | None = None
    text: str = ""
    error: str | None = None
    signal: int | None = None  # the signal that killed the process (SIGILL, SIGSEGV, ...), if one did
    ttft_s: float | None = None  # seconds to the first streamed token (requests under load)


def killed_by(rc: int | None) -> int | None:
    """The signal number of a process killed by a signal (subprocess gives ``-signal``), else None."""
    return -rc if rc is not None and rc < 0 else None


@dataclass(frozen=True)
class Spread:
    median: float
    min: float
    max: float
    n: int

    @staticmethod
    def of(values: Sequence[float]) -> Spread | None:
        return Spread(statistics.median(values), min(values), max(values), len(values)) if values else None


@dataclass(frozen=True)
class LoadFigures:
    """A cell measured with several clients at once (its ``cell.clients``, on ``cell.slots`` slots): per side the
    aggregate tokens per second of each round (all clients' tokens over the round's wall time), latencies and time
    to first token of the speculative side."""

    plain_aggregate: Spread | None
    spec_aggregate: Spread | None
    latency_p50: float | None
    latency_p95: float | None
    baseline_latency_p95: float | None
    ttft_p50: float | None
    differing_share: float | None  # outputs unlike the single-client plain output (information, not a fault)
    prompt_repeats: bool  # a prompt reached one speculative server twice


@dataclass(frozen=True)
class Divergence:
    """Where, at temperature 0, speculative output first left the plain output."""

    prompt_index: int
    repeat: int
    position: int  # first differing character in the plain text's range
    plain_excerpt: str
    spec_excerpt: str


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    status: str  # ok, failed, timeout, cancelled
    error: str | None
    plain: Spread | None  # tokens/s
    spec: Spread | None
    speedup: float | None  # spec median / plain median; None when speculation did not run
    speculation_ran: bool
    n_drafted: int
    n_accept: int
    acceptance_rate: float | None
    mean_accepted_per_verification: float | None
    identical: bool | None  # None unless temperature 0 and both sides ran
    divergences: tuple[Divergence, ...]
    elapsed_s: float  # the whole cell, Python included
    process_s: float  # inside llama.cpp processes
    llama_s: float  # llama.cpp's own prompt+generation timings
    runs: tuple[Run, ...] = field(repr=False, default=())
    # other work on the machine slows speculation far more than the plain run (llama.cpp's threads
    # busy-wait for each other), so a busy machine must show in the results
    other_cpu_share: float | None = None
    crash_signal: int | None = None  # a llama.cpp process of this cell was killed by this signal
    load: LoadFigures | None = None  # several clients at once (runner.measure.load): aggregate speeds, latencies
    # The speedup of each interleaved pair (a speculative run over the plain run beside it; under load, a round
    # over the plain round before it): a gain is measurable only when it lies beyond this spread (runner.sweep.sweep).
    pair_speedups: Spread | None = None

    @property
    def first_difference(self) -> int | None:
        """Where the first prompt whose texts parted parted (the report's excerpt is that prompt's)."""
        return self.divergences[0].position if self.divergences else None

    @property
    def earliest_difference(self) -> int | None:
        """The earliest character where any prompt's speculative text left its plain text: past it, that prompt's
        acceptance is another text's, so a comparison of whole-cell figures holds only while this is late."""
        return min((d.position for d in self.divergences), default=None)


def context_size(cell: Cell) -> int:
    """The cell's context, grown when prompt + generation + draft could overflow it (characters bound
    tokens from above); plain and speculative runs get the same size so neither side is favoured."""
    need = max((len(p) for p in cell.prompts), default=0) + cell.n_predict + cell.k + 64
    return max(cell.ctx_size, -(-need // 256) * 256)


def cpu_seconds() -> tuple[float, float] | None:
    """(CPU time used by the whole machine, by this process and its reaped children), Linux only."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    t = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system + t.children_user + t.children_system


def other_cpu_share(
    before: tuple[float, float] | None, after: tuple[float, float] | None, elapsed_s: float
) -> float | None:
    """Share of the machine's CPU capacity that other work used meanwhile (0 = quiet machine)."""
    if before is None or after is None or elapsed_s <= 0:
        return None
    foreign = (after[0] - before[0]) - (after[1] - before[1])
    return max(0.0, foreign / (elapsed_s * (os.cpu_count() or 1)))


def compare_texts(plain: str, spec: str) -> int | None:
    """First differing character over the plain text's length, or None when identical there.

    Speculation may overshoot -n by up to K tokens, so only the plain run's span is compared.
    """
    # a token may end mid-way through a UTF-8 character; its replacement mark is not a divergence
    plain = plain.rstrip("\ufffd")
    head = spec[: len(plain)]
    if head == plain:
        return None
    return len(os.path.commonprefix([plain, head]))


def divergence(plain: Run, spec: Run) -> Divergence | None:
    pos = compare_texts(plain.text, spec.text)
    if pos is None:
        return None
    lo = max(0, pos - 40)
    return Divergence(plain.prompt_index, plain.repeat, pos, plain.text[lo : pos + 40], spec.text[lo : pos + 40])


def summarize(
    cell: Cell,
    runs: Sequence[Run],
    status: str,
    error: str | None,
    elapsed_s: float,
    cpu_before: tuple[float, float] | None = None,
    crash_signal: int | None = None,
) -> CellResult:
    """Aggregate the runs of a cell (usable on stored runs; ``cpu_before`` adds the machine's busyness)."""
    plain = [r for r in runs if r.kind == "plain" and r.state == "ok"]
    spec = [r for r in runs if r.kind == "spec" and r.state == "ok"]
    p_spread = Spread.of([r.tokens_per_s for r in plain if r.tokens_per_s])
    s_spread = Spread.of([r.tokens_per_s for r in spec if r.tokens_per_s])
    drafted = sum(r.n_drafted for r in spec)
    accepted = sum(r.n_accept for r in spec)
    verifications = sum(r.n_tokens - r.n_accept for r in spec)
    ran = drafted > 0
    speedup = s_spread.median / p_spread.median if ran and p_spread and s_spread and p_spread.median > 0 else None
    tps = {(r.prompt_index, r.repeat): r.tokens_per_s for r in plain if r.tokens_per_s}
    # each speculative run against the plain run it was interleaved with (same prompt and repeat)
    ratios = [r.tokens_per_s / tps[k] for r in spec if r.tokens_per_s and (k := (r.prompt_index, r.repeat)) in tps]
    identical, divergences = None, []
    if cell.temperature == 0 and plain and spec:
        by_key = {(r.prompt_index, r.repeat): r for r in plain}
        for s in spec:
            p = by_key.get((s.prompt_index, s.repeat))
            if p is not None and (d := divergence(p, s)) is not None:
                divergences.append(d)
        identical = not divergences
    return CellResult(
        cell=cell,
        status=status,
        error=error,
        plain=p_spread,
        spec=s_spread,
        speedup=speedup,
        speculation_ran=ran,
        n_drafted=drafted,
        n_accept=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_accepted_per_verification=accepted / verifications if ran and verifications > 0 else None,
        identical=identical,
        divergences=tuple(divergences),
        elapsed_s=elapsed_s,
        process_s=sum(r.wall_s for r in runs),
        llama_s=sum(r.llama_s for r in runs),
        runs=tuple(runs),
        other_cpu_share=other_cpu_share(cpu_before, cpu_seconds(), elapsed_s) if cpu_before and runs else None,
        crash_signal=crash_signal or next((r.signal for r in runs if r.signal), None),
        pair_speedups=Spread.of(ratios) if ran else None,
    )


def interleave(
    cell: Cell,
    run_one: Callable[[str, int, int], Run],
    *,
    what: str,
    label: str,
    progress: Progress | None,
    should_cancel: Cancel | None,
    start: float,
) -> CellResult:
    """Per repeat and prompt a plain run then a speculative one (A B A B), so drift over time affects both
    sides alike; a failing run stops the cell (a crash would only repeat). ``run_one(kind, prompt, repeat)``."""
    runs: list[Run] = []
    cpu_before = cpu_seconds()
    total = 2 * len(cell.prompts) * cell.repeats
    for r in range(cell.repeats):
        for i in range(len(cell.prompts)):
            for kind in ("plain", "spec"):
                if procs.SHUTDOWN.is_set() or (should_cancel is not None and should_cancel()):
                    return summarize(cell, runs, "cancelled", "cancelled", time.monotonic() - start, cpu_before)
                run = run_one(kind, i, r)
                runs.append(run)
                if run.state != "ok":
                    status = run.state if run.state in ("timeout", "cancelled") else "failed"
                    return summarize(cell, runs, status, run.error, time.monotonic() - start, cpu_before)
                if progress is not None:
                    speed = f"{run.tokens_per_s:.1f} t/s" if run.tokens_per_s else "-"
                    progress(len(runs) / total, f"{label}: {kind} {what} {len(runs)}/{total} {speed}")
    return summarize(cell, runs, "ok", None, time.monotonic() - start, cpu_before)
