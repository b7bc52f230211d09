"""Benchmark the inspector's worst inputs (B and F below): what each costs, against its goal.

Run: .venv/bin/python tests/bench/bench_hostile_inspector.py   (prints figures; goals in brackets)

B: a 16 MiB header of ~1.9 million tiny tokens (the public upload cap), little- and big-endian, read as
   /local/inspect reads it: seconds, Python's peak allocation while reading (tracemalloc, run apart from
   the timing: it slows Python down) and the peak resident set it added (VmHWM), each in a fresh
   process; then comparing two such tables the slow ways (a NUL in every token, two byte orders).
F: the fake Hub dripping one byte at a time against SPECREG_HEADER_DEADLINE_SECONDS: how long past the
   deadline one read, a read whose status line drips, and a two-file check each ended.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PROBE = """
import os, sys, time, tracemalloc
sys.path.insert(0, {root!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
import django
django.setup()
from registry.web.header_upload import inspect_prefix
from tests import hostile
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) * 1024
body = hostile.tiny_tokens_header(big_endian={big!r})
import numpy  # loaded by the big-endian path; imported first so its own size is not counted
base = hwm()
start = time.perf_counter()
info = inspect_prefix("tiny.gguf", body, len(body), len(body))
seconds = time.perf_counter() - start
rss = hwm() - base
tracemalloc.start()
inspect_prefix("tiny.gguf", body, len(body), len(body))
peak = tracemalloc.get_traced_memory()[1]
print(seconds, peak, rss, len(body), info.tokenizer.n_tokens, sep="\\t")
"""


def measure(big_endian: bool) -> tuple[float, int, int, int, int]:
    code = PROBE.format(root=str(ROOT), big=big_endian)
    env = {**os.environ, "SPECREG_DATA_DIR": tempfile.mkdtemp()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=600)
    seconds, peak, rss, size, n = out.stdout.strip().split("\t")
    return float(seconds), int(peak), int(rss), int(size), int(n)


def bench_tables() -> None:
    print(
        "B. A 16 MiB header of tiny tokens through /local/inspect's reader (fresh process each)  "
        "[goal: < 1 s, extra memory <= 4x the header]"
    )
    for big in (False, True):
        seconds, peak, rss, size, n = measure(big)
        print(
            f"  {'big' if big else 'little':6}-endian, {n:,} tokens   {seconds * 1000:7.1f} ms   "
            f"tracemalloc peak {peak / 2**20:6.1f} MiB ({peak / size:4.2f}x)   resident +{rss / 2**20:6.1f} MiB "
            f"({rss / size:4.2f}x of {size / 2**20:.1f} MiB)"
        )
    import struct
    import tracemalloc

    from inspector.tokens import TokenTable, first_text_mismatch

    def repeated(texts: tuple[bytes, ...], times: int, byteorder: str = "<") -> TokenTable:
        block = b"".join(struct.pack(byteorder + "Q", len(t)) + t for t in texts)
        return TokenTable(block * times, len(texts) * times, byteorder)

    print("   comparing two such tables (llama.cpp's token-text rule)  [goal: < 1 s, temporaries a few MiB]")
    cases = [
        (
            "a NUL then a difference in each of 1.5M tokens",
            repeated((b"x\0a",), 1_500_000),
            repeated((b"x\0b",), 1_500_000),
        ),
        (
            "1.86M tiny tokens, little- against big-endian",
            repeated((b"", b"a", b"", b"b\0c"), 465_000),
            repeated((b"", b"a", b"", b"b\0c"), 465_000, ">"),
        ),
    ]
    for label, a, b in cases:
        start = time.perf_counter()
        found = first_text_mismatch(a, b)
        seconds = time.perf_counter() - start
        tracemalloc.start()
        first_text_mismatch(a, b)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"  {label:50} {seconds * 1000:7.1f} ms   tracemalloc peak {peak / 2**20:5.1f} MiB   "
            f"({'equal' if found is None else found.token_id})"
        )


def bench_drip() -> None:
    from huggingface_hub.utils import close_session

    from inspector import cli
    from inspector.info import InspectError, inspect_source
    from tests.ggufgen import vocab, write_gguf
    from tests.hub import FakeHub, sockets_to

    deadline = 5.0
    os.environ.update(
        {
            "SPECREG_HEADER_DEADLINE_SECONDS": f"{deadline:g}",
            "NO_PROXY": "127.0.0.1",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        }
    )
    print(
        f"F. The fake Hub dripping one byte at a time, SPECREG_HEADER_DEADLINE_SECONDS={deadline:g}  "
        "[goal: every read ends within the deadline + 2 s, with one line]"
    )
    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        os.environ["HF_ENDPOINT"] = hub.url
        close_session()
        d = Path(tmp)
        hub.add_repo("o/small", {"m.gguf": write_gguf(d / "t.gguf", model=None, pre=None, hparams=False)})
        hub.add_repo("o/big", {"m.gguf": write_gguf(d / "d.gguf", tokens=vocab(2000))})
        cases = [
            (
                "one read, a body byte every 4.5 s (under the per-read timeout)",
                4.5,
                False,
                lambda: inspect_source("hf://o/big/m.gguf"),
            ),
            ("one read, a status-line byte every 1 s", 1.0, True, lambda: inspect_source("hf://o/big/m.gguf")),
            (
                "two-file check: 128 bytes read in 3.8 s, then the second file",
                0.03,
                False,
                lambda: cli.check("hf://o/small/m.gguf", "hf://o/big/m.gguf", out=sys.stdout),
            ),
        ]
        for label, drip, headers, run in cases:
            hub.drip_seconds, hub.drip_headers = drip, headers
            start = time.monotonic()
            try:
                run()
                outcome = "read (unexpected)"
            except (InspectError, cli.UserError) as exc:
                outcome = str(exc)
            took = time.monotonic() - start
            left_open = sockets_to(hub.cdn_url)
            print(
                f"  {label:64} ended {took:5.2f} s ({took - deadline:+.2f} s past the deadline), "
                f"{left_open} socket(s) to the server left open"
            )
            print(f"    {outcome}")
            settled = time.monotonic()
            while hub.dripping and time.monotonic() - settled < 10:  # the next case starts clean
                time.sleep(0.05)


def main() -> None:
    bench_tables()
    bench_drip()


if __name__ == "__main__":
    # No options; --help prints the docstring before any work starts.
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
