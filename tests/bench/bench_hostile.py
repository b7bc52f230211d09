"""Benchmark the header reader on the hostile headers of tests/hostile.py: time and peak memory of each read.

Run: .venv/bin/python tests/bench/bench_hostile.py   (prints figures; goals in brackets)
Each read runs in a fresh process; memory is the peak resident set (VmHWM) minus the peak after imports.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inspector.gguf_header import MAX_KEYS, MAX_TENSORS  # noqa: E402
from tests import hostile  # noqa: E402

PROBE = """
import os, sys, time
sys.path.insert(0, {root!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) * 1024
from inspector.gguf_header import read_header
from inspector.sources import FileSource
if {upload!r}:
    import django
    django.setup()
    from registry.web.header_upload import inspect_prefix
    body = open({path!r}, "rb").read()
base = hwm()
start = time.perf_counter()
try:
    if {upload!r}:
        inspect_prefix("x.gguf", body, 10**12)
    else:
        with FileSource.open({path!r}) as src:
            read_header(src)
    outcome = "read"
except Exception as exc:
    outcome = type(exc).__name__ + ": " + str(exc)[:90]
print(time.perf_counter() - start, hwm() - base, outcome, sep="\\t")
"""


def measure(path: Path, upload: bool = False) -> tuple[float, int, str]:
    code = PROBE.format(root=str(ROOT), path=str(path), upload=upload)
    env = {**os.environ, "SPECREG_DATA_DIR": tempfile.mkdtemp()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, timeout=600)
    seconds, memory, outcome = out.stdout.strip().split("\t", 2)
    return float(seconds), int(memory), outcome


def measure_header(path: Path) -> int:
    """The bytes a reader must look at: the header (tensor data excluded), or the whole file if refused."""
    from inspector.gguf_header import GGUFError, read_header
    from inspector.sources import FileSource

    try:
        with FileSource.open(path) as src:
            return read_header(src).header_size
    except GGUFError:
        return path.stat().st_size


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        body = d / "body.bin"
        body.write_bytes(hostile.nested_arrays_body())
        cases = [
            ("49-byte POST: array of 5,592,400 arrays, claimed size 1 TB", body, True),
            (
                "the same header with its 64 MiB of elements, a normal file",
                hostile.nested_arrays_file(d / "nested.gguf"),
                False,
            ),
            (
                "the same 49 bytes in a 256 MiB sparse file",
                hostile.sparse(d / "nested-sparse.gguf", hostile.nested_arrays_body()),
                False,
            ),
            ("49-byte POST: array of 8,000,000 strings, none sent", None, True),
            (
                "array of 33.5M empty strings filling a 256 MiB sparse file",
                hostile.huge_string_array(d / "strings.gguf"),
                False,
            ),
            (f"{MAX_KEYS:,} keys (the budget)", hostile.many_keys(d / "keys.gguf", MAX_KEYS), False),
            ("1,000,000 keys (past the budget)", hostile.many_keys(d / "keys2.gguf", 1_000_000), False),
            (
                f"{MAX_KEYS:,} keys each a 64-element u8 array",
                hostile.many_small_arrays(d / "arrays.gguf", MAX_KEYS),
                False,
            ),
            (
                f"{MAX_TENSORS:,} tensors (the budget), 25 header bytes each",
                hostile.many_tensors(d / "tensors.gguf", MAX_TENSORS),
                False,
            ),
        ]
        strings_body = d / "strings-body.bin"
        strings_body.write_bytes(hostile.string_array_body(8_000_000))
        print(
            "Hostile headers: time and peak memory of one read (fresh process each)  "
            "[goal: refused or read in < 1 s for the nested arrays; memory <= 4x the header's bytes]"
        )
        for label, path, upload in cases:
            path = path or strings_body
            size = path.stat().st_size if upload else measure_header(path)
            seconds, memory, outcome = measure(path, upload)
            print(
                f"  {label[:62]:62} {seconds * 1000:9.1f} ms  {memory / 2**20:8.1f} MiB "
                f"({memory / size:5.2f}x of {size / 2**20:.2f} MiB)  {outcome}"
            )


if __name__ == "__main__":
    # No options; --help prints the docstring before any work starts.
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
