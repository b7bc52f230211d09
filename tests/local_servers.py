"""Local servers a test starts: a free port, waiting for something to come up, and llama-server speculating with
SmolLM2 as its own draft."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from runner.llama.binaries import LlamaCppNotFound, find_binary
from tests.needs import missing

T = TypeVar("T")


PROMPT = (
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
    "def fibonacci(n):"
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """llama-server with SmolLM2 as its own draft (K=4), metrics on, one slot, on a fixed port."""

    def __init__(self, model: Path, port: int, log: Path) -> None:
        try:
            self.binary = find_binary("llama-server")
        except LlamaCppNotFound as exc:
            missing(str(exc))
        self.model, self.port, self.log = model, port, log
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def argv(self) -> list[str]:
        m = str(self.model)
        return [
            str(self.binary),
            "-m",
            m,
            "-md",
            m,
            "--spec-type",
            "draft-simple",
            "--spec-draft-n-max",
            "4",
            "--metrics",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "-c",
            "1024",
            "-np",
            "1",
            "-t",
            "2",
        ]

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
        self.proc = subprocess.Popen(
            self.argv, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama-server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"llama-server did not start: {self.log.read_text()[-2000:]}")

    def complete(self, n: int = 40) -> dict:
        body = json.dumps({"prompt": PROMPT, "n_predict": n, "temperature": 0, "cache_prompt": False}).encode()
        req = urllib.request.Request(self.url + "/completion", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def wait_for(predicate: Callable[[], T], timeout: float, what: str) -> T:
    """``predicate``'s first true value, asked every 0.3 s; an AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
