"""Registry benchmark on PostgreSQL: 10,000 files with real token tables, ~100,000 pairs, gunicorn under load.

Prints: registering one new file (index lookup + exact checks + new pairs; goal < 1 s), the
"compatible drafts for a target" query (goal < 50 ms), and the table page's p95 at 50 requests/s
from 20 concurrent clients for 60 s against gunicorn on loopback (goal < 150 ms).

    .venv/bin/python tests/bench/bench_registry.py [--families 455] [--per-family 22] [--duration 60]

Files are variants of the real vocabularies (SmolLM2, Qwen2.5, Gemma 3): each family changes one
token below id 4096 (so it gets its own vocabulary key) and some files pad the table by 64 tokens
or flip add_bos, so every candidate goes through llama.cpp's exact rules during registration.
The database named by --db is dropped and recreated.
"""
from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from queue import Empty, Queue

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL (no database)")
    p.add_argument("--db", default="specreg_bench")
    p.add_argument("--families", type=int, default=455)
    p.add_argument("--per-family", type=int, default=22)
    p.add_argument("--reported", type=int, default=5000, help="reported results spread over random pairs")
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    p.add_argument("--reuse", action="store_true", help="keep an already filled database")
    p.add_argument("--no-cache", action="store_true", help="turn the table-page cache off (every request hits the database)")
    return p.parse_args()


ARGS = parse_args()
os.environ["DATABASE_URL"] = f"{ARGS.server.rstrip('/')}/{ARGS.db}"
os.environ["DJANGO_SETTINGS_MODULE"] = "registry.settings"
os.environ.setdefault("DB_CONN_MAX_AGE", "60")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from inspector.info import ModelInfo, inspect_source  # noqa: E402
from inspector.tokens import TokenTable as Tokens, vocab_key  # noqa: E402
from registry import pairing, registration, stored  # noqa: E402
from registry.drafts import compatible_drafts  # noqa: E402
from registry.models import GGUFFile, Pair, ReportedResult  # noqa: E402
from registry.results import refresh_best  # noqa: E402
from tests.models import model_path  # noqa: E402


# ---- building variants of real vocabularies ----------------------------------------------------
def element(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def replace_token(t: Tokens, i: int, text: bytes) -> Tokens:
    blob = t.blob
    start = t.offsets[i] - t.start  # offsets are positions in the header the table was read from
    end = t.offsets[i + 1] - t.start if i + 1 < t.count else len(blob)
    return Tokens(blob[:start] + element(text) + blob[end:], t.count)


def pad(t: Tokens, n: int) -> Tokens:
    return Tokens(t.blob + b"".join(element(f"<bench_pad_{i}>".encode()) for i in range(n)), t.count + n)


def variant(base: ModelInfo, tokens: Tokens, params: int, add_bos: bool | None = None) -> ModelInfo:
    info = ModelInfo.from_dict(base.to_dict(), tokens)
    tok = info.tokenizer
    tok.n_tokens, tok.table_sha256 = tokens.count, tokens.sha256
    tok.vocab_key = vocab_key(tok.vocab_type, tokens)
    if add_bos is not None:
        tok.add_bos = add_bos
    info.parameter_count = params
    return info


SIZES = [0.5, 1, 1.5, 3, 7, 14, 32, 72]


def fill(families: int, per_family: int) -> float:
    bases = [inspect_source(str(model_path("smollm2"))), inspect_source(str(model_path("qwen05", headers_only=True))),
             inspect_source(str(model_path("gemma3", headers_only=True)))]
    started = time.monotonic()
    rng = random.Random(1)
    for fam in range(families):
        base = bases[0] if fam % 20 < 17 else bases[1] if fam % 20 < 19 else bases[2]
        i = 100 + fam % 3900  # below the key prefix: a new vocabulary key per family
        own = replace_token(base.tokens, i, base.tokens.text(i) + f"~{fam}".encode())
        padded = pad(own, 64)
        for j in range(per_family):
            params = int(SIZES[j % len(SIZES)] * 1e9 * (1 + j / 100))
            info = variant(base, padded if j % 4 == 3 else own, params, add_bos=True if j == per_family - 1 else None)
            quant = ["Q4_K_M", "Q8_0", "Q5_K_M"][j // len(SIZES) % 3]
            path = f"bench-{SIZES[j % len(SIZES)]}b-{quant}.gguf"
            registration.register(info, source=f"hf://bench/family-{fam}/{path}", repo=f"bench/family-{fam}",
                                  path=path, commit="0" * 40, etag=f"bench-{fam}-{j}", size=params // 2)
        if fam % 25 == 0:
            done = (fam + 1) * per_family
            rate = done / (time.monotonic() - started)
            print(f"  filled {done:,} files ({rate:.0f}/s), {Pair.objects.count():,} pairs", flush=True)
    ids = list(Pair.objects.filter(compatible=True).values_list("pk", flat=True))
    for pk in rng.sample(ids, min(ARGS.reported, len(ids))):
        k = rng.choice([4, 8, 16, 24])
        ReportedResult.objects.create(
            pair_id=pk, k=k, acceptance=rng.uniform(0.3, 0.9), speedup=rng.uniform(0.3, 3.0),
            content_type=rng.choice(["code", "chat", "prose", "math"]),
            hardware=rng.choice(["2-core CPU", "RTX 4090", "H100", "M2 Max"]),
            llama_cpp_build=rng.choice(["b11434", "b10000"]), citation="benchmark fill")
        refresh_best(Pair(pk=pk))
    return time.monotonic() - started


# ---- measurements ------------------------------------------------------------------------------
def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)


def time_register_one(n: int = 5) -> list[float]:
    """Register n new files into existing families, cold token-table cache each time."""
    base = inspect_source(str(model_path("smollm2")))
    times = []
    for r in range(n):
        fam = r * 7
        i = 100 + fam % 3900
        own = replace_token(base.tokens, i, base.tokens.text(i) + f"~{fam}".encode())
        info = variant(base, own, int(0.3e9), None)
        stored._tables.clear()
        t0 = time.perf_counter()
        reg = registration.register(info, source=f"hf://bench/new-{r}/new-Q4_K_M.gguf", repo=f"bench/new-{r}",
                                    path="new-Q4_K_M.gguf", etag=f"new-{r}-{time.time()}", size=1)
        times.append(time.perf_counter() - t0)
        print(f"  {reg.status} {reg.file.source}: {reg.pairs_added} new and {reg.pairs_updated} re-checked pairs in {times[-1] * 1000:.0f} ms "
              f"({pairing.candidates(reg.file).count()} candidates)")
    return times


def time_compatible_drafts(n: int = 300) -> list[float]:
    rng = random.Random(2)
    targets = list(GGUFFile.objects.filter(pairs_as_target__compatible=True).distinct().values_list("pk", flat=True))
    times = []
    for pk in rng.sample(targets, min(n, len(targets))):
        t0 = time.perf_counter()
        target = GGUFFile.objects.get(pk=pk)
        rows = list(compatible_drafts(target))
        times.append(time.perf_counter() - t0)
        assert rows
    return times


POPULAR = ["/", "/", "/?page=2", "/?sort=-ratio", "/?sort=target", "/?verdict=all", "/?q=smollm", "/?q=qwen2",
           "/?min_speedup=1.5", "/?content_type=code", "/?hardware=H100&sort=-speedup", "/?verdict=incompatible"]


def table_urls(rng: random.Random) -> str:
    """Half popular pages, half one-off queries (deep pages, any family, any sort) that no cache holds."""
    if rng.random() < 0.5:
        return rng.choice(POPULAR)
    params = {"page": rng.randint(1, 1500), "sort": rng.choice(["-speedup", "-ratio", "target", "-draft", "acceptance", "-k"])}
    r = rng.random()
    if r < 0.3:
        params = {"q": f"family-{rng.randint(0, ARGS.families - 1)}/", "sort": params["sort"]}
    elif r < 0.45:
        params.update(content_type=rng.choice(["code", "chat", "prose", "math"]), page=rng.randint(1, 5))
    elif r < 0.55:
        params.update(min_speedup=round(rng.uniform(0.5, 2.5), 1), page=rng.randint(1, 20))
    return "/?" + urllib.parse.urlencode(params)


def load(base_url: str, rate: float, clients: int, duration: float) -> tuple[list[float], int, float]:
    """Open-loop load: requests are due at a fixed rate; latency is measured from when each was due."""
    due: Queue = Queue()
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    rng = random.Random(3)
    total = int(rate * duration)
    start = time.monotonic() + 0.5

    def client() -> None:
        while True:
            try:
                at, path = due.get(timeout=duration + 30)
            except Empty:
                return
            if at is None:
                return
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                with urllib.request.urlopen(base_url + path, timeout=30) as r:
                    r.read()
                    ok = r.status == 200
            except Exception:  # noqa: BLE001 - counted, not raised
                ok = False
            elapsed = time.monotonic() - at
            with lock:
                latencies.append(elapsed)
                if not ok:
                    errors[0] += 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for n in range(total):
        due.put((start + n / rate, table_urls(rng)))
    for _ in threads:
        due.put((None, None))
    for t in threads:
        t.join()
    return latencies, errors[0], time.monotonic() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    if not ARGS.reuse:
        admin_url = f"{ARGS.server.rstrip('/')}/postgres"
        subprocess.run(["psql", admin_url, "-q", "-c", f"DROP DATABASE IF EXISTS {ARGS.db}", "-c",
                        f"CREATE DATABASE {ARGS.db}"], check=True)
        call_command("migrate", verbosity=0)
        print(f"Filling {ARGS.families * ARGS.per_family:,} files in {ARGS.families} families …", flush=True)
        seconds = fill(ARGS.families, ARGS.per_family)
        print(f"  fill took {seconds:.0f} s")
        with connection.cursor() as c:
            c.execute("ANALYZE")
    files, pairs = GGUFFile.objects.count(), Pair.objects.count()
    with connection.cursor() as c:
        c.execute("SELECT count(*), pg_size_pretty(sum(length(blob))) FROM registry_tokentable")
        tables, table_bytes = c.fetchone()
    print(f"Database: {files:,} files, {pairs:,} pairs ({Pair.objects.filter(compatible=True).count():,} compatible), "
          f"{tables:,} distinct token tables ({table_bytes}), {ReportedResult.objects.count():,} reported results")

    reg_times = time_register_one()
    drafts = time_compatible_drafts()
    connection.close()

    port = free_port()
    env = dict(os.environ, DEBUG="false", ALLOWED_HOSTS="127.0.0.1,localhost")
    if ARGS.no_cache:
        env["SPECREG_TABLE_CACHE_SECONDS"] = "0"
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "registry.wsgi", "-w", str(ARGS.workers), "-b",
                               f"127.0.0.1:{port}", "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        base_url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(base_url + "/", timeout=5).read()
                break
            except OSError:
                time.sleep(0.2)
        for path in ["/", "/?q=smollm", "/?page=40", "/?content_type=code"] * 3:  # warm every worker
            urllib.request.urlopen(base_url + path, timeout=30).read()
        print(f"Load: {ARGS.rate:.0f} req/s from {ARGS.clients} clients for {ARGS.duration:.0f} s against gunicorn "
              f"({ARGS.workers} workers) on {base_url} …", flush=True)
        latencies, errors, wall = load(base_url, ARGS.rate, ARGS.clients, ARGS.duration)
    finally:
        server.terminate()
        server.wait(timeout=30)

    ms = sorted(x * 1000 for x in latencies)
    print()
    print("== specreg registry benchmark (PostgreSQL, gunicorn on loopback) ==")
    print(f"files {files:,}   pairs {pairs:,}")
    print(f"register one new file: median {statistics.median(reg_times) * 1000:.0f} ms, max {max(reg_times) * 1000:.0f} ms   (goal < 1000 ms)")
    print(f"compatible drafts for a target: median {statistics.median(drafts) * 1000:.1f} ms, "
          f"p95 {p95(drafts) * 1000:.1f} ms over {len(drafts)} targets   (goal < 50 ms)")
    print(f"table page ({'no cache' if ARGS.no_cache else 'cache on'}): {len(ms):,} requests in {wall:.1f} s ({len(ms) / wall:.1f}/s), errors {errors}, "
          f"median {statistics.median(ms):.0f} ms, p95 {p95(ms):.0f} ms, p99 {statistics.quantiles(ms, n=100)[-1]:.0f} ms, "
          f"max {ms[-1]:.0f} ms   (goal p95 < 150 ms)")


if __name__ == "__main__":
    main()
