"""A soak: the deployed llama-server setting under a loop of task-set requests for minutes to hours, recorded every
interval, stopped early with a verdict when the server crashes, stops answering, grows in memory or fails requests.

This module is the loop and its verdict (no database): ``runner.soak.targets`` queues soaks and stores their records.

- Before the soak a plain server with the same slots answers the first REFERENCE_PROMPTS prompts once (one client:
  its outputs are what the soak's outputs of those prompts are compared with; several clients: one concurrent
  round gives the plain throughput).
- ``clients`` threads then send prompts in turn, each waiting for its answer before the next, as a user would. The
  prompts come round again once every one was sent: n-gram methods then find their own earlier answers (their
  pool outlives requests), so such a record is labelled as measured with repeats.
- Every ``interval_s`` an interval is closed: requests, tokens and aggregate throughput, drafted and accepted
  tokens, the server's resident memory (VmRSS of its process), errors and time-outs, and at one client how many
  outputs differed from the plain ones.
- Memory is judged against the first interval's (the model is loaded and its pages touched by then).
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from inspector.llama_flags import Capabilities, LlamaCppError
from inspector.spec_flags import Setting
from runner.llama import procs
from runner.measure.cells import Cell, compare_texts, context_size
from runner.measure.server import Completion, Server, free_port, plain_server_argv, spec_server_argv

POLL_S = 0.25  # how often the loop looks at the server, the clock and the cancel flag
# One client: the plain outputs recorded before the soak, for the first prompts (every content type in turn), which
# the soak's outputs of the same prompts are compared with; more would delay a big model's soak by many minutes.
REFERENCE_PROMPTS = 8
MIN_REQUESTS_FOR_ERRORS = 10  # the error share is judged once this many requests ended


class SoakError(Exception):
    """A soak cannot be started as asked; one line."""


@dataclass(frozen=True)
class SoakConfig:
    target: str
    draft: str | None
    setting: Setting
    prompts: tuple[str, ...]  # rendered with the chat template
    duration_s: float = 3600.0
    interval_s: float = 60.0
    clients: int = 1
    parallel: int = 0  # slots (-np); 0: as many as clients
    n_predict: int = 128
    seed: int = 42
    ctx_size: int = 2048  # per slot
    threads: int | None = None
    gpu_layers: int | None = None
    request_timeout_s: float = 300.0
    memory_growth: float = 0.5  # stop when resident memory exceeds the first interval's by this share
    error_share: float = 0.05  # stop when this share of requests failed

    @property
    def slots(self) -> int:
        return self.parallel or self.clients


@dataclass
class Interval:
    t: float  # seconds from the soak's start to the interval's end
    requests: int = 0
    tokens: int = 0
    tokens_per_second: float = 0.0
    drafted: int = 0
    accepted: int = 0
    acceptance: float | None = None
    rss_mb: float | None = None
    errors: int = 0
    timeouts: int = 0
    compared: int = 0
    differing: int = 0


@dataclass
class SoakRecord:
    """What a soak has recorded so far; ``status`` "running" until it ends."""

    command: str
    status: str = "running"  # running, stable, failed, timeout, unstable, cancelled, interrupted
    verdict: str = ""
    elapsed_s: float = 0.0
    intervals: list[Interval] = field(default_factory=list)
    baseline_tokens_per_second: float | None = None
    prompt_repeats: bool = False

    def total(self, name: str) -> int:
        return sum(getattr(i, name) for i in self.intervals)

    @property
    def rss_start_mb(self) -> float | None:
        return next((i.rss_mb for i in self.intervals if i.rss_mb is not None), None)

    @property
    def rss_end_mb(self) -> float | None:
        return next((i.rss_mb for i in reversed(self.intervals) if i.rss_mb is not None), None)

    @property
    def acceptance(self) -> float | None:
        drafted = self.total("drafted")
        return self.total("accepted") / drafted if drafted else None

    @property
    def acceptance_range(self) -> tuple[float, float] | None:
        values = [i.acceptance for i in self.intervals if i.acceptance is not None]
        return (min(values), max(values)) if values else None

    @property
    def tokens_per_second(self) -> float | None:
        busy = [i for i in self.intervals if i.requests]
        return sum(i.tokens_per_second for i in busy) / len(busy) if busy else None

    def as_dicts(self) -> list[dict[str, Any]]:
        return [asdict(i) for i in self.intervals]


def duration_text(seconds: float) -> str:
    """``45 s``, ``12 min``, ``1 h``, ``2.5 h``: how long, as a verdict says it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h".replace(".0 h", " h")


def rss_mb(pid: int | None) -> float | None:
    """Resident memory of a process (VmRSS), in MiB; None when it is gone or not Linux."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def _server_kw(config: SoakConfig) -> dict[str, Any]:
    probe = Cell(config.target, "", config.setting.k, config.prompts, n_predict=config.n_predict)
    return {
        "ctx_size": max(config.ctx_size, context_size(probe)),
        "threads": config.threads,
        "gpu_layers": config.gpu_layers,
        "parallel": config.slots,
    }


def servers(caps: Capabilities, config: SoakConfig) -> tuple[Server, Server]:
    """The plain server (for the reference outputs) and the soaked one, both with the deployed flags."""
    kw = _server_kw(config)
    p_port, s_port = free_port(), free_port()
    try:
        plain = Server(plain_server_argv(caps, config.target, p_port, **kw), p_port)
        spec = Server(spec_server_argv(caps, config.target, config.draft, config.setting, s_port, **kw), s_port)
    except LlamaCppError as exc:
        raise SoakError(str(exc)) from None
    return plain, spec


# How long a failed request waits for a dying server's exit before its client asks again.
SETTLE_S = 0.5


class _Clients:
    """``clients`` threads sending prompts in turn until stopped; every answer is kept as an event."""

    def __init__(self, server: Server, config: SoakConfig) -> None:
        self.server, self.config = server, config
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.events: list[tuple[Completion, int]] = []  # (answer, prompt index); drained by the loop
        self.counter = itertools.count()
        self.sent = 0
        self.last_answer = time.monotonic()
        self.threads = [
            threading.Thread(target=self._loop, name=f"soak-client-{i}", daemon=True) for i in range(config.clients)
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                n = next(self.counter)
                self.sent = n + 1
            i = n % len(self.config.prompts)
            c = _ask(self.server, self.config, i)
            if c.state != "ok" and (self.stop.is_set() or procs.SHUTDOWN.is_set()):
                return  # the soak or the worker ended under it: not an error of the server's
            with self.lock:
                self.events.append((c, i))
                if c.state == "ok":
                    self.last_answer = time.monotonic()
            if c.state != "ok" and self.server.exited_within(SETTLE_S):
                # The server is gone (the loop reports how): one failed request per client says so, where asking
                # again until the loop's next poll recorded thousands a second; a server that is only slow costs
                # the settling pause before the next try.
                return

    def drain(self) -> list[tuple[Completion, int]]:
        with self.lock:
            out, self.events = self.events, []
        return out

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)


def _ask(server: Server, config: SoakConfig, i: int) -> Completion:
    """Prompt ``i`` once, as the soak sends it (temperature 0, the soak's own time limit per request)."""
    return server.complete(
        config.prompts[i],
        n_predict=config.n_predict,
        temperature=0.0,
        seed=config.seed,
        timeout_s=config.request_timeout_s,
    )


def _close(
    events: list[tuple[Completion, int]], t: float, span: float, pid: int | None, refs: dict[int, str]
) -> Interval:
    ok = [(c, i) for c, i in events if c.state == "ok"]
    iv = Interval(t=round(t, 1), requests=len(events))
    iv.tokens = sum(c.n_tokens for c, _ in ok)
    iv.tokens_per_second = iv.tokens / span if span > 0 else 0.0
    iv.drafted = sum(c.n_drafted for c, _ in ok)
    iv.accepted = sum(c.n_accept for c, _ in ok)
    iv.acceptance = iv.accepted / iv.drafted if iv.drafted else None
    iv.rss_mb = rss_mb(pid)
    iv.errors = sum(1 for c, _ in events if c.state == "failed")
    iv.timeouts = sum(1 for c, _ in events if c.state == "timeout")
    for c, i in ok:
        if i in refs:
            iv.compared += 1
            iv.differing += compare_texts(refs[i], c.text) is not None
    return iv


def _reference(plain: Server, config: SoakConfig, record: SoakRecord, cancelled: Callable[[], bool]) -> dict[int, str]:
    """One client: the first prompts once, their outputs kept, the plain speed from them; several: one round."""
    refs: dict[int, str] = {}
    if config.clients == 1:
        tokens, seconds = 0, 0.0
        for i in range(min(REFERENCE_PROMPTS, len(config.prompts))):
            if cancelled():
                break
            c = _ask(plain, config, i)
            if c.state != "ok":
                raise SoakError(f"the plain server failed before the soak: {c.error}")
            refs[i] = c.text
            tokens, seconds = tokens + c.n_tokens, seconds + c.wall_s
        record.baseline_tokens_per_second = tokens / seconds if seconds > 0 else None
        return refs
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=config.clients) as pool:
        answers = list(pool.map(lambda i: _ask(plain, config, i % len(config.prompts)), range(config.clients)))
    wall = time.monotonic() - t0
    bad = next((c for c in answers if c.state != "ok"), None)
    if bad is not None:
        raise SoakError(f"the plain server failed before the soak: {bad.error}")
    record.baseline_tokens_per_second = sum(c.n_tokens for c in answers) / wall if wall > 0 else None
    return refs


def run_soak(
    config: SoakConfig,
    caps: Capabilities,
    *,
    on_interval: Callable[[SoakRecord], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    progress: Callable[[float, str], None] | None = None,
) -> SoakRecord:
    """Soak ``config.setting``; always returns a finished record (status other than "running")."""
    if not config.prompts:
        raise SoakError("no prompts to send")
    plain, spec = servers(caps, config)
    record = SoakRecord(command=" ".join(spec.argv))
    stopping = functools.partial(_stopping, should_cancel or (lambda: False))
    try:
        problem = plain.start(should_cancel=should_cancel)
        if problem:
            raise SoakError(f"plain llama-server: {problem}")
        if progress:
            progress(0.0, "plain outputs recorded before the soak")
        refs = _reference(plain, config, record, stopping)
        plain.stop()
        if stopping():
            return _finish(record, *_stopped(record, 0.0))
        problem = spec.start(should_cancel=should_cancel)
        if problem:
            raise SoakError(f"llama-server with {config.setting.label}: {problem}")
        soak = _Soak(config, spec, _Clients(spec, config), record, refs, stopping)
        return _soak_loop(soak, on_interval, progress)
    finally:
        plain.stop()
        spec.stop()


def _stopping(cancelled: Callable[[], bool]) -> bool:
    """Whether the soak must stop now: the worker is stopping (SIGTERM) or the soak was cancelled."""
    return procs.SHUTDOWN.is_set() or cancelled()


def _finish(record: SoakRecord, status: str, verdict: str) -> SoakRecord:
    record.status, record.verdict = status, verdict
    return record


@dataclass
class _Soak:
    """A soak under way: the soaked server and its clients, the record, and the plain outputs compared with."""

    config: SoakConfig
    spec: Server
    clients: _Clients
    record: SoakRecord
    refs: dict[int, str]
    stopping: Callable[[], bool]

    def close(self, elapsed: float) -> Interval:
        """The interval since the last one closed (its answers drained), and the record's running totals."""
        record = self.record
        last_t = record.intervals[-1].t if record.intervals else 0.0
        record.elapsed_s = elapsed
        record.prompt_repeats = self.clients.sent > len(self.config.prompts)
        return _close(self.clients.drain(), elapsed, elapsed - last_t, self.spec.pid, self.refs)


def _soak_loop(
    soak: _Soak,
    on_interval: Callable[[SoakRecord], None] | None,
    progress: Callable[[float, str], None] | None,
) -> SoakRecord:
    """The clients' requests against the soaked server, an interval closed and judged every ``interval_s``, until
    the duration ends, a verdict stops it, or the server dies, falls silent or the soak is stopped."""
    config, spec, clients, record = soak.config, soak.spec, soak.clients, soak.record
    start = time.monotonic()
    clients.last_answer = start
    boundary = start + config.interval_s
    clients.start()
    try:
        while True:
            time.sleep(POLL_S)
            now = time.monotonic()
            elapsed = now - start
            end = elapsed >= config.duration_s
            if not spec.alive or soak.stopping() or now - clients.last_answer > config.request_timeout_s:
                status, verdict = _early(record, spec, config, elapsed, now - clients.last_answer, soak.stopping())
                partial = soak.close(elapsed)
                if partial.requests or not spec.alive:
                    record.intervals.append(partial)
                return _finish(record, status, verdict)
            if now < boundary and not end:
                continue
            record.intervals.append(soak.close(elapsed))
            boundary += config.interval_s
            if progress:
                iv = record.intervals[-1]
                progress(
                    min(0.99, elapsed / config.duration_s),
                    f"soak {duration_text(elapsed)}: {iv.tokens_per_second:.1f} t/s, {iv.requests} requests",
                )
            judged = _judge(record, config)
            if judged is not None:
                return _finish(record, *judged)
            if on_interval:
                on_interval(record)
            if end:
                return _finish(record, "stable", stable_verdict(record, config))
    finally:
        clients.stop.set()
        spec.stop()  # closes the sockets of requests still waiting on it
        clients.join()


def _stopped(record: SoakRecord, elapsed: float) -> tuple[str, str]:
    if procs.SHUTDOWN.is_set():
        return "interrupted", (
            f"interrupted after {duration_text(elapsed)}: the worker was stopped (SIGTERM); the partial record is kept"
        )
    return "cancelled", f"cancelled after {duration_text(elapsed)}; the partial record is kept"


def _early(
    record: SoakRecord, spec: Server, config: SoakConfig, elapsed: float, silent: float, stopping: bool
) -> tuple[str, str]:
    """Why the soak ended before its time: the server exited, stopped answering, or the soak was stopped."""
    after = duration_text(elapsed)
    if stopping:  # first: a stopping worker (SIGTERM) kills every llama.cpp process it started, this server too
        return _stopped(record, elapsed)
    if not spec.alive:
        rc = spec.proc.poll() if spec.proc is not None else None
        how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
        return "failed", f"failed after {after}: llama-server exited ({how}): {spec.last_error()}"
    return "timeout", (
        f"timed out after {after}: llama-server answered no request for {silent:.0f} s "
        f"(the limit per request is {config.request_timeout_s:g} s)"
    )


def _judge(record: SoakRecord, config: SoakConfig) -> tuple[str, str] | None:
    """A verdict that stops the soak now (memory past its bound, too many failed requests), else None."""
    after = duration_text(record.elapsed_s)
    first, last = record.rss_start_mb, record.rss_end_mb
    if first and last and last > first * (1 + config.memory_growth):
        return "unstable", (
            f"unstable after {after}: llama-server's memory grew {last / first - 1:+.0%} "
            f"({first:.0f} → {last:.0f} MiB; the bound is {config.memory_growth:+.0%})"
        )
    ended = record.total("requests")
    errors = record.total("errors") + record.total("timeouts")
    if ended >= MIN_REQUESTS_FOR_ERRORS and errors / ended > config.error_share:
        return "failed", (
            f"failed after {after}: {errors} of {ended} requests failed or timed out "
            f"({errors / ended:.0%}; the bound is {config.error_share:.0%})"
        )
    return None


def stable_verdict(record: SoakRecord, config: SoakConfig) -> str:
    """``stable for 8 h at 2 clients: 0 errors, memory +3%, acceptance 78–81%`` and what else was seen."""
    errors, timeouts = record.total("errors"), record.total("timeouts")
    parts = [f"{errors} error{'s' if errors != 1 else ''}"]
    if timeouts:
        parts.append(f"{timeouts} time-out{'s' if timeouts != 1 else ''}")
    first, last = record.rss_start_mb, record.rss_end_mb
    if first and last:
        parts.append(f"memory {last / first - 1:+.0%}")
    rng = record.acceptance_range
    if rng is not None:
        lo, hi = rng
        parts.append(f"acceptance {lo:.0%}–{hi:.0%}" if round(lo, 2) != round(hi, 2) else f"acceptance {lo:.0%}")
    compared = record.total("compared")
    if compared:
        parts.append(f"{compared - record.total('differing')}/{compared} outputs identical to plain")
    if record.prompt_repeats:
        parts.append("prompts repeated")
    n = config.clients
    return f"stable for {duration_text(record.elapsed_s)} at {n} client{'s' if n != 1 else ''}: {', '.join(parts)}"
