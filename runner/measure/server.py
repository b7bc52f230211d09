"""Measure a cell through ``llama-server`` (``--via server``): what a deployment serves, not the CLI tools.

Two servers run side by side for the whole cell, one plain (``--spec-type none``) and one speculating
with the cell's setting, both started with the options the deployment builder writes. Each prompt is
sent to one, then the other (A B A B, as for the command-line tools); speed and draft figures come from
each response's ``timings`` (``predicted_per_second``, ``draft_n``, ``draft_n_accepted``). Per-request
draft settings are disabled in current builds, so a setting is a server of its own.

The speculative server is started afresh for every request: in llama-server the n-gram methods keep
what they saw across requests (``ngram-mod``'s hash pool lives as long as the slot:
``common/speculative.cpp``, ``common_speculative_impl_ngram_mod::begin`` only adds the new prompt), so
a repeat of the same prompt would find its own earlier answer and draft it perfectly, and read as a gain where
fresh requests draft nothing. (figures: docs/benchmarks.md, "Figures behind design choices")
Each request therefore starts from what a first request on a new server has; traffic that repeats
itself may gain more in production, which the deployment's observed figures show.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TypedDict

from inspector.llama_flags import Capabilities, LlamaCppError
from inspector.spec_flags import Setting, uses_draft_file
from registry.results.deploy import deployment
from runner.llama import procs
from runner.llama.output import RunFailure, parse_server_completion
from runner.measure.cells import Cancel, Cell, CellResult, Progress, Run, context_size, interleave, summarize

# Loading a model is the slow part of a start; a server that has not answered health by then is stuck.
START_TIMEOUT_S = 300.0
# Never send requests for localhost through a proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MAX_RESPONSE = 16 * 1024 * 1024  # a completion of a few thousand tokens is far smaller


class ServerSize(TypedDict):
    """The keywords both servers of a cell share."""

    ctx_size: int
    threads: int | None
    gpu_layers: int | None
    parallel: int


@dataclass(frozen=True)
class Completion:
    """One response's figures; ``error`` set when the request failed (one line)."""

    text: str = ""
    tokens_per_s: float | None = None
    n_tokens: int = 0
    n_drafted: int = 0
    n_accept: int = 0
    llama_s: float = 0.0
    wall_s: float = 0.0
    error: str | None = None
    state: str = "ok"  # ok, failed, timeout, cancelled
    ttft_s: float | None = None  # to the first streamed piece of text (streamed requests only)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _deployed_argv(
    caps: Capabilities,
    target: str,
    draft: str | None,
    setting: Setting | None,
    port: int,
    *,
    ctx_size: int,
    threads: int | None,
    gpu_layers: int | None,
    parallel: int = 1,
) -> list[str]:
    """The command the deployment builder writes (``registry.results.deploy``, the one builder), run by this binary
    on a loopback port. A GPU cell offloads everything, as the deployed command does; ``parallel`` slots (-np) of
    ``ctx_size`` each, as deployed."""
    if setting is not None and uses_draft_file(setting.method) and not draft:
        raise LlamaCppError(f"{setting.method} needs a draft file (-md)")
    dep = deployment(
        caps,
        target,
        draft if setting is not None and uses_draft_file(setting.method) else None,
        setting.k if setting is not None else None,
        port=port,
        ctx_size=ctx_size,
        threads=threads,
        gpu=gpu_layers is not None,
        setting=setting,
        parallel=parallel,
    )
    return [str(caps.binary), *dep.argv[1:]]


def plain_server_argv(
    caps: Capabilities,
    target: str,
    port: int,
    *,
    ctx_size: int,
    threads: int | None,
    gpu_layers: int | None,
    parallel: int = 1,
) -> list[str]:
    argv = _deployed_argv(
        caps, target, None, None, port, ctx_size=ctx_size, threads=threads, gpu_layers=gpu_layers, parallel=parallel
    )
    if caps.has("--spec-type"):
        argv += ["--spec-type", "none"]  # no default (upstream discusses ngram-mod on) may make it speculate
    return argv + _quiet(caps)


def spec_server_argv(
    caps: Capabilities,
    target: str,
    draft: str | None,
    setting: Setting,
    port: int,
    *,
    ctx_size: int,
    threads: int | None,
    gpu_layers: int | None,
    parallel: int = 1,
) -> list[str]:
    """The server deployed for ``setting`` (same flags, ``-np`` included), on a loopback port."""
    return _deployed_argv(
        caps,
        target,
        draft,
        setting,
        port,
        ctx_size=ctx_size,
        threads=threads,
        gpu_layers=gpu_layers,
        parallel=parallel,
    ) + _quiet(caps)


def _quiet(caps: Capabilities) -> list[str]:
    return ["--no-webui"] if caps.has("--no-webui") else []


class Server:
    """A llama-server in its own process group, registered so a stopping worker kills it too."""

    def __init__(self, argv: list[str], port: int) -> None:
        self.argv, self.port = argv, port
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        self.err: procs.Capture | None = None

    def start(self, *, should_cancel=None, timeout_s: float = START_TIMEOUT_S) -> str | None:
        """Start and wait for ``/health``; None when ready, else why not (one line)."""
        self.proc, self.err, problem = procs.start_service(self.argv)
        if problem:
            return problem
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"llama-server exited with code {self.proc.returncode} while loading: {self.last_error()}"
            if procs.SHUTDOWN.is_set() or (should_cancel is not None and should_cancel()):
                return "cancelled"
            try:
                with _OPENER.open(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        return None
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        return f"llama-server did not answer /health within {timeout_s:g} s"

    @property
    def crash_signal(self) -> int | None:
        """The signal that killed this server, if one did (SIGILL: a build this machine cannot run)."""
        rc = self.proc.poll() if self.proc is not None else None
        return -rc if rc is not None and rc < 0 else None

    def last_error(self) -> str:
        """The last error-looking line llama.cpp printed (its own reason), else the last line."""
        lines = [ln.strip() for ln in (self.err.text() if self.err else "").splitlines() if ln.strip()]
        for ln in reversed(lines):
            if "error" in ln.lower() or "failed" in ln.lower():
                return ln[:300]
        return lines[-1][:300] if lines else "no output"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exited_within(self, seconds: float) -> bool:
        """Whether the process has exited or does within ``seconds``: a killed server refuses connections a moment
        before its process has exited, so a failed request asks this rather than ``alive``."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def complete(
        self, prompt: str, *, n_predict: int, temperature: float, seed: int, timeout_s: float, stream: bool = False
    ) -> Completion:
        """One request; ``stream`` reads the answer piece by piece (server-sent events) to time the first token."""
        body = json.dumps(
            {
                "prompt": prompt,
                "n_predict": n_predict,
                "temperature": temperature,
                "seed": seed,
                "cache_prompt": False,
                "stream": stream,
            }
        ).encode()
        req = urllib.request.Request(  # noqa: S310 - http:// to the server we started
            self.base + "/completion", data=body, headers={"Content-Type": "application/json"}
        )
        t0 = time.monotonic()
        try:
            with _OPENER.open(req, timeout=timeout_s) as r:
                if stream:
                    data, ttft = _read_stream(r, t0, time.monotonic() + timeout_s)
                else:
                    data, ttft = json.loads(r.read(MAX_RESPONSE + 1)[:MAX_RESPONSE]), None
        except TimeoutError:
            return Completion(
                wall_s=time.monotonic() - t0,
                state="timeout",
                error=f"llama-server gave no answer within {timeout_s:g} s",
            )
        except urllib.error.HTTPError as exc:
            detail = exc.read(4096).decode("utf-8", "replace").strip().replace("\n", " ")
            return Completion(
                wall_s=time.monotonic() - t0, state="failed", error=f"llama-server answered {exc.code}: {detail[:200]}"
            )
        except (OSError, ValueError) as exc:
            gone = self.proc is not None and self.proc.poll() is not None
            why = f"llama-server exited ({self.last_error()})" if gone else f"request failed: {exc}"
            return Completion(wall_s=time.monotonic() - t0, state="failed", error=why)
        wall = time.monotonic() - t0
        fig = parse_server_completion(data)
        if isinstance(fig, RunFailure):
            return Completion(wall_s=wall, state="failed", error=fig.message)
        return Completion(
            text=fig.text,
            tokens_per_s=fig.predicted_per_second or None,
            n_tokens=fig.predicted_n,
            n_drafted=fig.draft_n or 0,
            n_accept=fig.draft_n_accepted or 0,
            llama_s=(fig.predicted_ms + fig.prompt_ms) / 1000,
            wall_s=wall,
            ttft_s=ttft,
        )

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop_service(self.proc)
            self.proc = None


def run_of(kind: str, i: int, r: int, c: Completion, server: Server) -> Run:
    """One request's answer as a run of its cell (draft counts only on the speculative side)."""
    spec_side = kind == "spec"
    return Run(
        kind,
        i,
        r,
        c.state,
        c.wall_s,
        c.llama_s,
        c.tokens_per_s,
        c.n_tokens,
        c.n_drafted if spec_side else 0,
        c.n_accept if spec_side else 0,
        None,
        c.text,
        c.error,
        signal=server.crash_signal if c.state != "ok" else None,
        ttft_s=c.ttft_s,
    )


def _read_stream(r, t0: float, deadline: float) -> tuple[dict, float | None]:
    """The final event of a streamed ``/completion`` (its ``timings``) with ``content`` set to the whole text, and
    the seconds to the first piece of text. Bounded: at most MAX_RESPONSE bytes and the request's deadline."""
    pieces: list[str] = []
    ttft: float | None = None
    last: dict = {}
    read = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError
        line = r.readline(MAX_RESPONSE)
        if not line:
            break
        read += len(line)
        if read > MAX_RESPONSE:
            raise ValueError("streamed answer too long")
        if not line.startswith(b"data: "):
            continue
        event = json.loads(line[6:])
        if not isinstance(event, dict):
            raise ValueError("an event is not a JSON object")
        if "error" in event:
            return event, ttft
        text = event.get("content") or ""
        if text and ttft is None:
            ttft = time.monotonic() - t0
        pieces.append(str(text))
        last = event
        if event.get("stop"):
            break
    return {**last, "content": "".join(pieces)}, ttft


def measure_via_server(
    cell: Cell, caps: Capabilities, *, progress: Progress | None = None, should_cancel: Cancel | None = None
) -> CellResult:
    """``measure_cell`` for ``cell.via == "server"``: the same runs, figures and summary, from two servers.

    The speculative server starts afresh before every request: ngram-mod's pool outlives requests in
    llama-server, so a repeated prompt would draft its own earlier answer."""
    start = time.monotonic()
    ctx = context_size(cell)
    kw = ServerSize(ctx_size=ctx, threads=cell.threads, gpu_layers=cell.gpu_layers, parallel=cell.slots)
    p_port, s_port = free_port(), free_port()
    try:
        plain = Server(plain_server_argv(caps, cell.target, p_port, **kw), p_port)
        spec = Server(spec_server_argv(caps, cell.target, cell.draft or None, cell.setting, s_port, **kw), s_port)
    except LlamaCppError as exc:
        return summarize(cell, [], "failed", str(exc), time.monotonic() - start)
    try:
        problem = plain.start(should_cancel=should_cancel)
        if problem == "cancelled":
            return summarize(cell, [], "cancelled", "cancelled", time.monotonic() - start)
        if problem:
            return summarize(
                cell,
                [],
                "failed",
                f"plain llama-server: {problem}",
                time.monotonic() - start,
                crash_signal=plain.crash_signal,
            )

        def run_one(kind: str, i: int, r: int) -> Run:
            server = plain if kind == "plain" else spec
            if kind == "spec":  # a fresh server: nothing left over from earlier requests
                spec.stop()
                problem = spec.start(should_cancel=should_cancel)
                if problem == "cancelled":
                    return Run(kind, i, r, "cancelled", 0.0, 0.0, error="cancelled")
                if problem:
                    return Run(
                        kind,
                        i,
                        r,
                        "failed",
                        0.0,
                        0.0,
                        error=f"speculative llama-server: {problem}",
                        signal=spec.crash_signal,
                    )
            c = server.complete(
                cell.prompts[i],
                n_predict=cell.n_predict,
                temperature=cell.temperature,
                seed=cell.seed,
                timeout_s=cell.timeout_s,
            )
            return run_of(kind, i, r, c, server)

        label = f"{cell.setting.label} via server" + (f" {cell.content_type}" if cell.content_type else "")
        return interleave(
            cell, run_one, what="request", label=label, progress=progress, should_cancel=should_cancel, start=start
        )
    finally:
        plain.stop()
        spec.stop()
