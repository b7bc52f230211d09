"""Registry benchmark on PostgreSQL: 10,000 files with real token tables, ~80,000 pairs, gunicorn under load.

Prints: registering one new file (index lookup + exact checks + new pairs; goal < 1 s), the
"compatible drafts for a target" query (goal < 50 ms), where one table request spends its time
(queries with their plans, other Python, the template; in-process, cache off), and the table
page's p50/p95/p99 per kind of page (the first page, a deep page by ?page=200 and by keyset
cursor, a search, each sort order, the filters, the CSV and API streams' first bytes) at 50
requests/s from 20 concurrent clients for 60 s against gunicorn on loopback (goal p95 < 150 ms
with the cache off, < 50 ms with it on).

    .venv/bin/python tests/bench/bench_registry.py [--families 455] [--per-family 22] [--duration 60]
        [--no-cache] [--reuse] [--profile-only]

Files are variants of the real vocabularies (SmolLM2, Qwen2.5, Gemma 3): each family changes one
token below id 4096 (so it gets its own vocabulary key) and some files pad the table by 64 tokens
or flip add_bos, so every candidate goes through llama.cpp's exact rules during registration. Every file is a base
model of its own (its own header basename and file name), so a family's files pair with each other, within the
listing rule's caps (registry.catalog.listing: 22 files give 174 pairs per family). The compatible-drafts query
is asked for targets that have drafts: base models with a compatible pair as the target, through one of their files.
The database named by --db is dropped and recreated (with --reuse it is kept, and migrated).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
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
    p.add_argument(
        "--no-cache", action="store_true", help="turn the table-page cache off (every request hits the database)"
    )
    p.add_argument(
        "--profile-only", action="store_true", help="only the in-process profile of each page kind (no load)"
    )
    return p.parse_args()


ARGS = parse_args()
os.environ["DATABASE_URL"] = f"{ARGS.server.rstrip('/')}/{ARGS.db}"
os.environ["DJANGO_SETTINGS_MODULE"] = "registry.settings"
os.environ.setdefault("DB_CONN_MAX_AGE", "60")
# This process profiles requests in-process: always uncached, and Django's test client as a host.
CACHE_SETTING = os.environ.get("SPECREG_TABLE_CACHE_SECONDS")
os.environ["SPECREG_TABLE_CACHE_SECONDS"] = "0"
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import F  # noqa: E402

from inspector.info import ModelInfo, inspect_source  # noqa: E402
from inspector.tokens import TokenTable as Tokens  # noqa: E402
from inspector.tokens import vocab_key  # noqa: E402
from registry.catalog import pairing, registration, stored  # noqa: E402
from registry.catalog.adaptable import decide_pending  # noqa: E402
from registry.hub.drafts import compatible_drafts  # noqa: E402
from registry.models import GGUFFile, Pair, ReportedResult  # noqa: E402
from registry.results.figures import refresh_best  # noqa: E402
from tests.bench.vocab_edit import pad, replace_token  # noqa: E402
from tests.models import model_path  # noqa: E402


# ---- building variants of real vocabularies ----------------------------------------------------
def variant(base: ModelInfo, tokens: Tokens, params: int, name: str, add_bos: bool | None = None) -> ModelInfo:
    info = ModelInfo.from_dict(base.to_dict(), tokens)
    # A model of its own (pairs join base models, which the header names): every file is a partner of every
    # other in its family, as the table's ~80,000 pairs need; the real header would make them all SmolLM2.
    info.basename, info.size_label = name, f"{params / 1e9:.2f}B"
    tok = info.tokenizer
    tok.n_tokens, tok.table_sha256 = tokens.count, tokens.sha256
    tok.vocab_key = vocab_key(tok.vocab_type, tokens)
    if add_bos is not None:
        tok.add_bos = add_bos
    info.parameter_count = params
    return info


SIZES = [0.5, 1, 1.5, 3, 7, 14, 32, 72]


def fill(families: int, per_family: int) -> float:
    bases = [
        inspect_source(str(model_path("smollm2"))),
        inspect_source(str(model_path("qwen05", headers_only=True))),
        inspect_source(str(model_path("gemma3", headers_only=True))),
    ]
    started = time.monotonic()
    rng = random.Random(1)
    for fam in range(families):
        base = bases[0] if fam % 20 < 17 else bases[1] if fam % 20 < 19 else bases[2]
        i = 100 + fam % 3900  # below the key prefix: a new vocabulary key per family
        own = replace_token(base.tokens, i, base.tokens.text(i) + f"~{fam}".encode())
        job: list[int] = []
        padded = pad(own, 64)
        for j in range(per_family):
            params = int(SIZES[j % len(SIZES)] * 1e9 * (1 + j / 100))
            info = variant(
                base, padded if j % 4 == 3 else own, params, f"bench-{fam}-{j}", True if j == per_family - 1 else None
            )
            quant = ["Q4_K_M", "Q8_0", "Q5_K_M"][j // len(SIZES) % 3]
            # A file name of its own too: files named alike but for the quant are one model (naming.model_name),
            # and a model has one base model, so ``bench-1b-Q4_K_M`` and ``bench-1b-Q8_0`` under two basenames
            # would move the model, with its first file, to the second one's base model.
            path = f"bench-{SIZES[j % len(SIZES)]}b-v{j}-{quant}.gguf"
            job.append(
                registration.register(
                    info,
                    source=f"hf://bench/family-{fam}/{path}",
                    repo=f"bench/family-{fam}",
                    path=path,
                    commit="0" * 40,
                    etag=f"bench-{fam}-{j}",
                    size=params // 2,
                ).file.pk
            )
        decide_pending(job)  # as an import job of the family's repository ends (registration.finish)
        if fam % 25 == 0:
            done = (fam + 1) * per_family
            rate = done / (time.monotonic() - started)
            print(f"  filled {done:,} files ({rate:.0f}/s), {Pair.objects.count():,} pairs", flush=True)
    ids = list(Pair.objects.filter(compatible=True).values_list("pk", flat=True))
    for pk in rng.sample(ids, min(ARGS.reported, len(ids))):
        k = rng.choice([4, 8, 16, 24])
        ReportedResult.objects.create(
            pair_id=pk,
            k=k,
            acceptance=rng.uniform(0.3, 0.9),
            speedup=rng.uniform(0.3, 3.0),
            content_type=rng.choice(["code", "chat", "prose", "math"]),
            hardware=rng.choice(["2-core CPU", "RTX 4090", "H100", "M2 Max"]),
            llama_cpp_build=rng.choice(["b11434", "b10000"]),
            citation="benchmark fill",
        )
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
        fam = r * 7 % ARGS.families
        i = 100 + fam % 3900
        own = replace_token(base.tokens, i, base.tokens.text(i) + f"~{fam}".encode())
        info = variant(base, own, int(0.3e9), f"new-{r}", None)
        stored._tables.clear()
        t0 = time.perf_counter()
        reg = registration.register(
            info,
            source=f"hf://bench/new-{r}/new-Q4_K_M.gguf",
            repo=f"bench/new-{r}",
            path="new-Q4_K_M.gguf",
            etag=f"new-{r}-{time.time()}",
            size=1,
        )
        times.append(time.perf_counter() - t0)
        print(
            f"  {reg.status} {reg.file.source}: {reg.pairs_added} new and {reg.pairs_updated} re-checked pairs in {times[-1] * 1000:.0f} ms "
            f"({pairing.candidates(reg.file).count()} candidates)"
        )
    return times


def time_compatible_drafts(n: int = 300) -> list[float]:
    """The model page's query for n targets with registered drafts: pairs join base models, so a target is a base
    model with a compatible pair as the target, asked for through one of its files (any quant: the same answer)."""
    rng = random.Random(2)
    bases = sorted(
        set(
            Pair.objects.filter(compatible=True)
            .exclude(target_base_id=F("draft_base_id"))
            .values_list("target_base_id", flat=True)
        )
    )
    targets = []
    for base_id in rng.sample(bases, min(n, len(bases))):
        files = list(GGUFFile.objects.filter(model__base_id=base_id).values_list("pk", flat=True)[:50])
        targets.append(rng.choice(files))
    times = []
    for pk in targets:
        t0 = time.perf_counter()
        target = GGUFFile.objects.get(pk=pk)
        rows = list(compatible_drafts(target))
        times.append(time.perf_counter() - t0)
        assert rows, f"no compatible drafts for file {pk} (base model {target.model.base_id})"
    return times


SORTS = [
    "-speedup",
    "speedup",
    "-acceptance",
    "acceptance",
    "-k",
    "k",
    "-ratio",
    "ratio",
    "-target",
    "target",
    "-draft",
    "draft",
    "-checked",
    "checked",
]
DEEP_ROW = 9_950  # the first row of page 200


def keyset_cursors() -> dict[str, list[str]]:
    """Per sort, cursors a few rows apart around row 9,950 (page 200): what following Next links reaches (in a
    smaller database, the last rows there are)."""
    try:
        from registry.sort_keys import sort_key
        from registry.table import keyset
        from registry.table.filters import filtered_pairs
        from registry.table.pages import keyed
        from registry.table.request import TableQuery
    except ImportError:  # a version without keyset paging
        return {}
    out = {}
    total = filtered_pairs(TableQuery()).count()
    start = max(0, min(DEEP_ROW - 1, total - 50))
    for sort in SORTS:
        key = sort_key(sort)
        rows = keyed(filtered_pairs(TableQuery(sort=sort)), key).order_by(*keyset.order_by(key))
        out[sort] = [keyset.encode(list(r)) for r in rows[start : start + 501 : 50]]
    return out if all(out.values()) else {}


def page_kinds(cursors: dict[str, list[str]]) -> dict[str, object]:
    """Kind of page -> a function giving one URL of that kind (random, so most miss any cache)."""
    fam = lambda rng: rng.randint(0, ARGS.families - 1)  # noqa: E731
    kinds: dict[str, object] = {
        "first page": lambda rng: "/",
        "deep ?page=200": lambda rng: (
            "/?" + urllib.parse.urlencode({"page": rng.randint(195, 205), "sort": rng.choice(SORTS)})
        ),
        "search family": lambda rng: (
            "/?" + urllib.parse.urlencode({"q": f"family-{fam(rng)}/", "sort": rng.choice(SORTS)})
        ),
        "search word": lambda rng: (
            "/?"
            + urllib.parse.urlencode(
                {
                    "q": rng.choice(["qwen2", "smollm", "gemma", "q8_0", "bench-7b", "llama"]),
                    "sort": rng.choice(SORTS),
                    "page": rng.randint(1, 3),
                }
            )
        ),
        "filter results": lambda rng: (
            "/?"
            + urllib.parse.urlencode(
                {
                    "content_type": rng.choice(["code", "chat", "prose", "math"]),
                    "page": rng.randint(1, 5),
                    "hardware": rng.choice(["", "H100", "4090"]),
                    "sort": rng.choice(SORTS),
                }
            )
        ),
        "filter speedup": lambda rng: (
            "/?"
            + urllib.parse.urlencode(
                {"min_speedup": round(rng.uniform(0.5, 2.5), 1), "page": rng.randint(1, 20), "sort": rng.choice(SORTS)}
            )
        ),
        "verdict": lambda rng: (
            "/?"
            + urllib.parse.urlencode(
                {"verdict": rng.choice(["incompatible", "all"]), "sort": rng.choice(SORTS), "page": rng.randint(1, 3)}
            )
        ),
    }
    if cursors:
        kinds["deep keyset (page 200)"] = lambda rng: (
            "/?"
            + urllib.parse.urlencode({"sort": (s := rng.choice(SORTS)), "after": rng.choice(cursors[s]), "page": 200})
        )
    for sort in SORTS:
        kinds[f"sort {sort}"] = lambda rng, sort=sort: (
            "/?" + urllib.parse.urlencode({"sort": sort, "page": rng.randint(1, 3)})
        )
    kinds["api page"] = lambda rng: (
        "/api/pairs?" + urllib.parse.urlencode({"sort": rng.choice(SORTS), "q": f"family-{fam(rng)}/"})
    )
    kinds["csv first 64 KiB"] = lambda rng: "/pairs.csv?" + urllib.parse.urlencode({"sort": rng.choice(SORTS)})
    return kinds


# ---- where a request's time goes (in-process, cache off) ----------------------------------------
def profile(kinds: dict[str, object], repeats: int = 5) -> None:
    """Per kind of page: total, SQL (queries, with the slowest one's plan), template, other Python."""
    from django.db import connection as conn
    from django.template.backends.django import Template
    from django.test import Client

    client = Client()
    rng = random.Random(5)
    timing = {"sql": 0.0, "queries": [], "template": 0.0, "depth": 0}

    def wrapper(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            dt = time.perf_counter() - t0
            timing["sql"] += dt
            timing["queries"].append((dt, sql, params))

    original_render = Template.render

    def render(self, *a, **kw):
        timing["depth"] += 1
        t0, sql0 = time.perf_counter(), timing["sql"]
        try:
            return original_render(self, *a, **kw)
        finally:
            timing["depth"] -= 1
            if timing["depth"] == 0:  # the outermost template, less the queries it ran itself
                timing["template"] += time.perf_counter() - t0 - (timing["sql"] - sql0)

    Template.render = render
    print()
    print(
        "Where one request's time goes (in-process, cache off, median of "
        f"{repeats}; SQL includes the driver; plan of the slowest query):"
    )
    try:
        with conn.execute_wrapper(wrapper):
            for name, make in kinds.items():
                totals, sqls, templates, counts, slowest = [], [], [], [], (0.0, "", ())
                for _ in range(repeats):
                    url = make(rng)
                    timing.update(sql=0.0, queries=[], template=0.0)
                    t0 = time.perf_counter()
                    r = client.get(url)
                    if r.streaming:  # the first 64 KiB of a stream, as a client reading it would wait for
                        got = 0
                        for part in r.streaming_content:
                            got += len(part)
                            if got >= 65536:
                                break
                        r.close()
                    else:
                        r.content  # noqa: B018
                    totals.append(time.perf_counter() - t0)
                    sqls.append(timing["sql"])
                    templates.append(timing["template"])
                    counts.append(len(timing["queries"]))
                    q = max(timing["queries"], default=(0.0, "", ()))
                    if q[0] > slowest[0]:
                        slowest = q
                    assert r.status_code == 200, (url, r.status_code)
                tot, sql, tpl = (statistics.median(x) * 1000 for x in (totals, sqls, templates))
                print(
                    f"  {name:24s} total {tot:6.1f} ms = SQL {sql:6.1f} ms ({statistics.median(counts):.0f} queries) "
                    f"+ template {tpl:5.1f} ms + other Python {tot - sql - tpl:5.1f} ms"
                )
                if slowest[1]:
                    print(f"      slowest query {slowest[0] * 1000:.1f} ms: {explain(slowest[1], slowest[2])}")
    finally:
        Template.render = original_render


def explain(sql: str, params) -> str:
    """The slowest query's plan, condensed to its nodes (and whether it scans the whole pair table)."""
    import json

    with connection.cursor() as c:
        c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = c.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def walk(node, depth=0):
        what = node["Node Type"]
        if node.get("Index Name"):
            what += f" {node['Index Name']}"
        elif node.get("Relation Name"):
            what += f" {node['Relation Name']}"
        yield f"{what} ({node.get('Actual Rows', '?')} rows)"
        for child in node.get("Plans", []):
            yield from walk(child, depth + 1)

    nodes = list(walk(plan[0]["Plan"]))
    seq = " SEQ SCAN OF registry_pair!" if any(n.startswith("Seq Scan registry_pair") for n in nodes) else ""
    return f"{plan[0]['Execution Time']:.1f} ms in the server: " + " > ".join(nodes[:7]) + seq


def stream_rates(every: int = 20_000) -> None:
    """The whole CSV and JSON exports, in-process: rows per second for each stretch of rows, first to last."""
    from django.test import Client

    client = Client()
    print()
    print("Exports streamed whole (in-process): rows/s for each stretch of rows, then the total:")
    for url, marker in [("/pairs.csv", b"\r\n"), ("/api/pairs?all=1", b'"llama_cpp_compatible"')]:
        response = client.get(url)
        t0 = last = time.perf_counter()
        rows, mark, rates = 0, every, []
        for part in response.streaming_content:
            rows += part.count(marker)
            if rows >= mark:
                now = time.perf_counter()
                rates.append(f"{every / (now - last):,.0f}")
                last, mark = now, mark + every
        total = time.perf_counter() - t0
        print(
            f"  {url:18s} {rows:,} rows in {total:.1f} s ({rows / total:,.0f}/s); per {every:,} rows: {', '.join(rates)}"
        )


# ---- load --------------------------------------------------------------------------------------
def load(
    base_url: str, kinds: dict[str, object], rate: float, clients: int, duration: float
) -> tuple[list[tuple[str, float, bool]], float]:
    """Open-loop load: requests are due at a fixed rate, kinds in turn; latency is measured from when each was due."""
    due: Queue = Queue()
    results: list[tuple[str, float, bool]] = []
    lock = threading.Lock()
    rng = random.Random(3)
    total = int(rate * duration)
    start = time.monotonic() + 0.5

    def client() -> None:
        while True:
            try:
                at, kind, path = due.get(timeout=duration + 30)
            except Empty:
                return
            if at is None:
                return
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                with urllib.request.urlopen(base_url + path, timeout=30) as r:
                    r.read(65536)  # streams: the first 64 KiB
                    ok = r.status == 200
            except Exception:  # noqa: BLE001 - counted, not raised
                ok = False
            elapsed = time.monotonic() - at
            with lock:
                results.append((kind, elapsed, ok))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    names = list(kinds)
    for n in range(total):
        kind = names[n % len(names)]
        due.put((start + n / rate, kind, kinds[kind](rng)))
    for _ in threads:
        due.put((None, None, None))
    for t in threads:
        t.join()
    return results, time.monotonic() - start


def percentiles(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) >= 2 else ms * 99
    return f"p50 {statistics.median(ms):6.0f}  p95 {q[94]:6.0f}  p99 {q[98]:6.0f}  max {max(ms):6.0f} ms"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    if not ARGS.reuse:
        admin_url = f"{ARGS.server.rstrip('/')}/postgres"
        subprocess.run(
            ["psql", admin_url, "-q", "-c", f"DROP DATABASE IF EXISTS {ARGS.db}", "-c", f"CREATE DATABASE {ARGS.db}"],
            check=True,
        )
        call_command("migrate", verbosity=0)
        print(f"Filling {ARGS.families * ARGS.per_family:,} files in {ARGS.families} families …", flush=True)
        seconds = fill(ARGS.families, ARGS.per_family)
        print(f"  fill took {seconds:.0f} s")
        with connection.cursor() as c:
            c.execute("ANALYZE")
    else:
        t0 = time.monotonic()
        call_command("migrate", verbosity=0)
        with connection.cursor() as c:
            c.execute("VACUUM ANALYZE registry_pair")
        print(f"Migrated and analysed the kept database in {time.monotonic() - t0:.1f} s")
    files, pairs = GGUFFile.objects.count(), Pair.objects.count()
    with connection.cursor() as c:
        c.execute("SELECT count(*), pg_size_pretty(sum(length(blob))) FROM registry_tokentable")
        tables, table_bytes = c.fetchone()
    print(
        f"Database: {files:,} files, {pairs:,} pairs ({Pair.objects.filter(compatible=True).count():,} compatible), "
        f"{tables:,} distinct token tables ({table_bytes}), {ReportedResult.objects.count():,} reported results"
    )

    cursors = keyset_cursors()
    kinds = page_kinds(cursors)
    profile(kinds)
    stream_rates()
    if ARGS.profile_only:
        return
    reg_times = time_register_one()
    drafts = time_compatible_drafts()
    connection.close()

    port = free_port()
    env = dict(os.environ, DEBUG="false", ALLOWED_HOSTS="127.0.0.1,localhost")
    env.pop("SPECREG_TABLE_CACHE_SECONDS")
    if ARGS.no_cache:
        env["SPECREG_TABLE_CACHE_SECONDS"] = "0"
    elif CACHE_SETTING is not None:
        env["SPECREG_TABLE_CACHE_SECONDS"] = CACHE_SETTING
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "registry.wsgi",
            "-w",
            str(ARGS.workers),
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        base_url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(base_url + "/", timeout=5).read()
                break
            except OSError:
                time.sleep(0.2)
        rng = random.Random(4)
        for make in list(kinds.values()) * 2:  # warm every worker
            urllib.request.urlopen(base_url + make(rng), timeout=30).read(65536)
        print(
            f"Load: {ARGS.rate:.0f} req/s from {ARGS.clients} clients for {ARGS.duration:.0f} s against gunicorn "
            f"({ARGS.workers} workers) on {base_url}, {len(kinds)} kinds of page in turn …",
            flush=True,
        )
        with open("/proc/loadavg") as f:
            load_before = f.read().split()[:3]
        results, wall = load(base_url, kinds, ARGS.rate, ARGS.clients, ARGS.duration)
        with open("/proc/loadavg") as f:
            load_after = f.read().split()[:3]
    finally:
        server.terminate()
        server.wait(timeout=30)

    ms = [x * 1000 for _, x, _ in results]
    errors = sum(1 for *_, ok in results if not ok)
    cache = "no cache" if ARGS.no_cache else f"cache on ({CACHE_SETTING or 'default'} s)"
    goal = 150 if ARGS.no_cache else 50
    print()
    print("== specreg registry benchmark (PostgreSQL, gunicorn on loopback) ==")
    print(
        f"files {files:,}   pairs {pairs:,}   machine: {os.cpu_count()} CPUs, load average before/after "
        f"{' '.join(load_before)} / {' '.join(load_after)}"
    )
    print(
        f"register one new file: median {statistics.median(reg_times) * 1000:.0f} ms, max {max(reg_times) * 1000:.0f} ms   (goal < 1000 ms)"
    )
    print(
        f"compatible drafts for a target: median {statistics.median(drafts) * 1000:.1f} ms, "
        f"p95 {p95(drafts) * 1000:.1f} ms over {len(drafts)} targets   (goal < 50 ms)"
    )
    print(
        f"table pages ({cache}): {len(ms):,} requests in {wall:.1f} s ({len(ms) / wall:.1f}/s served of "
        f"{ARGS.rate:.0f}/s asked), errors {errors}   (goal p95 < {goal} ms for every kind)"
    )
    print(f"  {'all kinds':24s} {len(ms):5d}  {percentiles(ms)}")
    for kind in kinds:
        kms = [x * 1000 for k, x, _ in results if k == kind]
        if kms:
            q95 = statistics.quantiles(kms, n=100, method="inclusive")[94] if len(kms) >= 2 else kms[0]
            verdict = "(export: no goal)" if kind.startswith("csv") else "ok" if q95 < goal else "OVER GOAL"
            print(f"  {kind:24s} {len(kms):5d}  {percentiles(kms)}  {verdict}")


if __name__ == "__main__":
    main()
