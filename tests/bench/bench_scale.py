"""Registry scale benchmark on PostgreSQL (issue 21): tokenizer families as the Hub has them.

One script per concern: bench_registry.py measures the table under load; this one measures how registration,
storage and the compatible-drafts query grow with files. It prints, per batch of registrations:
ms per file (mean and p95), files, base models, pairs, database size, the compatible-drafts query (listed pairs
and the base models answered from classes) for a
target of the family, and the table page (in-process, cache off), then the throughput of 1, 2 and 4
registering processes, and projects 200,000 files from the batches.

    .venv/bin/python tests/bench/bench_scale.py [--one-family 1000] [--zipf-files 50000] [--families 100]

Phase 1: one family of --one-family files (the worst case: every file a candidate of every other), as the
Hub holds a popular model: --bases-per-family base models (sizes 0.5B to 72B, instruct/coder/base), each
in several uploaders' repositories and quants. Phase 2: --zipf-files files in --families families whose
sizes follow Zipf's law (the largest holds at least 20%). Files are headers built in memory from the real
SmolLM2, Qwen2.5 and Gemma 3 vocabularies (each family changes one token, so it is its own vocabulary),
registered through registry.catalog.registration.register as an import would (no HTTP: bench_import's
concern). The database named by --db is dropped and created again.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL (no database)")
    p.add_argument("--db", default="specreg_scale")
    p.add_argument("--one-family", type=int, default=1000, help="files in the one-family phase")
    p.add_argument("--bases-per-family", type=int, default=50, help="base models in the one-family phase")
    p.add_argument("--zipf-files", type=int, default=50000, help="files in the Zipf phase (0: skip it)")
    p.add_argument("--families", type=int, default=100, help="families in the Zipf phase")
    p.add_argument("--zipf-s", type=float, default=1.05, help="Zipf exponent of the family sizes")
    p.add_argument("--batch", type=int, default=100, help="files per printed batch in phase 1")
    p.add_argument("--zipf-batch", type=int, default=5000, help="files per printed batch in phase 2")
    p.add_argument("--parallel-files", type=int, default=300, help="files each process registers when timing 1/2/4")
    return p.parse_args()


ARGS = parse_args()
os.environ["DATABASE_URL"] = f"{ARGS.server.rstrip('/')}/{ARGS.db}"
os.environ["DJANGO_SETTINGS_MODULE"] = "registry.settings"
os.environ["SPECREG_TABLE_CACHE_SECONDS"] = "0"  # the table page is timed with the cache off
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from inspector.info import ModelInfo, inspect_source  # noqa: E402
from inspector.tokens import TokenTable as Tokens  # noqa: E402
from inspector.tokens import vocab_key  # noqa: E402
from registry.catalog import registration, stored  # noqa: E402
from registry.catalog.listing import unlisted_partners  # noqa: E402
from registry.hub.drafts import compatible_drafts  # noqa: E402
from registry.models import BaseModel, GGUFFile, Pair  # noqa: E402
from tests.bench.vocab_edit import replace_token  # noqa: E402
from tests.models import model_path  # noqa: E402

SIZES = [("0.5B", 0.5), ("1.5B", 1.5), ("3B", 3), ("7B", 7), ("14B", 14), ("32B", 32), ("72B", 72)]
KINDS = ["Instruct", "Coder-Instruct", "", "Math-Instruct", "Abliterated", "Distill", "Uncensored"]
QUANTS = ["Q4_K_M", "Q8_0", "Q5_K_M", "Q6_K", "Q3_K_M", "IQ4_XS", "Q4_0", "Q2_K", "F16", "Q5_0"]


# ---- headers in memory ---------------------------------------------------------------------------
class Families:
    """Each family: its own vocabulary (one token changed) of one of three real tokenizers."""

    def __init__(self) -> None:
        self.real = [
            inspect_source(str(model_path("smollm2"))),
            inspect_source(str(model_path("qwen05", headers_only=True))),
            inspect_source(str(model_path("gemma3", headers_only=True))),
        ]
        self.tables: dict[int, tuple[ModelInfo, Tokens]] = {}

    def tokens(self, fam: int) -> tuple[ModelInfo, Tokens]:
        if fam not in self.tables:
            base = self.real[0 if fam % 10 < 7 else 1 if fam % 10 < 9 else 2]
            i = 100 + fam % 3900  # below the key prefix: a vocabulary key of its own
            self.tables[fam] = (base, replace_token(base.tokens, i, base.tokens.text(i) + f"~{fam}".encode()))
        return self.tables[fam]

    def info(self, fam: int, base_no: int, params: int) -> ModelInfo:
        real, tokens = self.tokens(fam)
        info = ModelInfo.from_dict(real.to_dict(), tokens)
        tok = info.tokenizer
        assert tok is not None
        tok.n_tokens, tok.vocab_key = tokens.count, vocab_key(tok.vocab_type, tokens)
        label, size = SIZES[base_no % len(SIZES)]
        kind = KINDS[(base_no // len(SIZES)) % len(KINDS)]
        series = base_no // (len(SIZES) * len(KINDS))
        info.basename = f"Fam{fam}-Series{series}"
        info.size_label = label
        info.metadata = {**info.metadata, "general.finetune": kind} if kind else info.metadata
        info.parameter_count = params or int(size * 1e9)
        return info


def register_file(fams: Families, fam: int, base_no: int, copy: int) -> float:
    """One file: base model ``base_no`` of family ``fam``, its ``copy``-th quant (uploaders × quants)."""
    info = fams.info(fam, base_no, 0)
    uploader, quant = copy // len(QUANTS), QUANTS[copy % len(QUANTS)]
    kind = info.metadata.get("general.finetune")
    name = f"{info.basename}-{info.size_label}" + (f"-{kind}" if kind else "")
    repo = f"uploader{uploader}/{name}-GGUF"
    path = f"{name}-{quant}.gguf"
    t0 = time.perf_counter()
    registration.register(
        info, source=f"hf://{repo}/{path}", repo=repo, path=path, commit="0" * 40, etag=f"{repo}/{path}", size=1
    )
    return time.perf_counter() - t0


# ---- measurements ---------------------------------------------------------------------------------
def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)


def db_mb() -> float:
    with connection.cursor() as c:
        c.execute("SELECT pg_database_size(current_database())")
        return c.fetchone()[0] / 2**20


def drafts_ms(fam: int, n: int = 20) -> float:
    """Median time of "compatible drafts" for the family's biggest targets (what the model page asks)."""
    targets = list(
        GGUFFile.objects.filter(pairs_as_target__compatible=True, source__contains=f"Fam{fam}-")
        .order_by("-parameter_count", "pk")
        .distinct()
        .values_list("pk", flat=True)[:n]
    )
    times = []
    for pk in targets:
        t0 = time.perf_counter()
        target = GGUFFile.objects.select_related("model__base").get(pk=pk)
        rows = list(compatible_drafts(target)) + unlisted_partners(target, "draft")  # listed, then from classes
        times.append(time.perf_counter() - t0)
        assert rows
    return 1000 * statistics.median(times) if times else float("nan")


def table_ms(client: Client, n: int = 20) -> tuple[float, float]:
    times = []
    for i in range(n):
        url = ["/", "/?sort=-ratio", "/?q=fam1-", "/?verdict=all&page=5"][i % 4]
        t0 = time.perf_counter()
        r = client.get(url)
        times.append(time.perf_counter() - t0)
        assert r.status_code == 200, (url, r.status_code)
    return 1000 * statistics.median(times), 1000 * p95(times)


def report(label: str, times: list[float], fam: int, client: Client) -> dict:
    row = {
        "label": label,
        "ms": 1000 * statistics.mean(times),
        "p95": 1000 * p95(times),
        "files": GGUFFile.objects.count(),
        "bases": BaseModel.objects.count(),
        "pairs": Pair.objects.count(),
        "mb": db_mb(),
        "drafts": drafts_ms(fam),
        "table": table_ms(client),
    }
    print(
        f"  {label:>14}: {row['ms']:6.1f} ms/file (p95 {row['p95']:6.1f}) | {row['files']:>6,} files "
        f"{row['bases']:>5,} base models {row['pairs']:>8,} pairs {row['mb']:7.1f} MB | drafts {row['drafts']:5.1f} ms "
        f"| table {row['table'][0]:5.1f} ms (p95 {row['table'][1]:5.1f})",
        flush=True,
    )
    return row


def plan_one_family(files: int, bases: int) -> list[tuple[int, int, int]]:
    """(family 0, base, copy) for ``files`` files over ``bases`` base models, shuffled as imports arrive."""
    per = max(1, files // bases)
    items = [(0, b, c) for b in range(bases) for c in range(per)][:files]
    random.Random(1).shuffle(items)
    return items


def plan_zipf(files: int, families: int, s: float) -> list[tuple[int, int, int]]:
    weights = [1 / (k**s) for k in range(1, families + 1)]
    total = sum(weights)
    sizes = [max(1, round(files * w / total)) for w in weights]
    items = []
    for f, n in enumerate(sizes, start=1):  # family 0 is phase 1's
        bases = max(1, n // 20)  # about 20 quants and uploads per base model, as on the Hub
        items += [(f, b % bases, b // bases) for b in range(n)]
    random.Random(2).shuffle(items)
    print(f"  Zipf families: largest {sizes[0]:,} files ({100 * sizes[0] / sum(sizes):.0f}%), smallest {sizes[-1]}")
    return items[:files]


def _worker(args: tuple[int, int, int]) -> int:
    """A registering process (phase 3): its own connection, its own files."""
    proc, n, offset = args
    from django.db import connections

    connections.close_all()
    fams = Families()
    for i in range(n):
        register_file(fams, 1000 + proc, i % 40, offset + i // 40)
    return n


def throughput(procs: int, n: int, round_no: int) -> float:
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("fork")
    connection.close()
    with ctx.Pool(procs) as pool:
        done = sum(pool.map(_worker, [(p + 10 * round_no, n, 0) for p in range(procs)]))
    return done / (time.perf_counter() - t0)


def project(rows: list[dict], target: int = 200_000) -> None:
    if len(rows) < 2:
        return
    a, b = rows[0], rows[-1]
    per_file_mb = (b["mb"] - a["mb"]) / max(1, b["files"] - a["files"])
    growth = (b["ms"] - a["ms"]) / max(1, b["files"] - a["files"])
    print(
        f"  projected to {target:,} files: {b['mb'] + per_file_mb * (target - b['files']):,.0f} MB "
        f"({1024 * per_file_mb:.1f} KB per file), {max(b['ms'], b['ms'] + growth * (target - b['files'])):.1f} ms "
        f"per registration (linear from the batches)"
    )


def main() -> None:
    from django.core.management import call_command

    server = ARGS.server.rstrip("/")
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{ARGS.db}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{ARGS.db}"')
    call_command("migrate", verbosity=0)
    client = Client()
    fams = Families()
    started = time.monotonic()

    print(f"phase 1: one family of {ARGS.one_family:,} files over {ARGS.bases_per_family} base models", flush=True)
    items, rows, batch = plan_one_family(ARGS.one_family, ARGS.bases_per_family), [], []
    for n, (fam, b, c) in enumerate(items, start=1):
        stored._tables.clear() if n % 50 == 0 else None  # now and then a cold token-table cache
        batch.append(register_file(fams, fam, b, c))
        if n % ARGS.batch == 0 or n == len(items):
            rows.append(report(f"{n:,}", batch, 0, client))
            batch = []
    first, last = rows[0], rows[-1]
    print(
        f"  => last batch {last['ms']:.1f} ms/file ({last['ms'] / first['ms']:.2f}x the first; goal <= 50 ms and <= 2x), "
        f"compatible drafts {last['drafts']:.1f} ms (goal <= 100), {last['mb']:.0f} MB (goal <= 200)"
    )

    if ARGS.zipf_files:
        print(f"phase 2: {ARGS.zipf_files:,} files in {ARGS.families} Zipf-sized families", flush=True)
        items, zrows, batch, every = plan_zipf(ARGS.zipf_files, ARGS.families, ARGS.zipf_s), [], [], []
        for n, (fam, b, c) in enumerate(items, start=1):
            t = register_file(fams, fam, b, c)
            batch.append(t)
            every.append(t)
            if n % ARGS.zipf_batch == 0 or n == len(items):
                zrows.append(report(f"+{n:,}", batch, 1, client))
                batch = []
        tables = [r["table"][1] for r in zrows]
        print(
            f"  => registration p95 {1000 * p95(every):.1f} ms (goal < 50), table page p95 {max(tables):.1f} ms at "
            f"worst (goal < 100, cache off); MB per 1,000 files by batch: "
            + ", ".join(
                f"{1000 * (b['mb'] - a['mb']) / max(1, b['files'] - a['files']):.1f}"
                for a, b in zip(zrows, zrows[1:], strict=False)
            )
        )
        project(zrows)
    else:
        project(rows)

    print("phase 3: registering processes (each its own files of one new family per process)", flush=True)
    rates = {}
    for i, procs in enumerate((1, 2, 4)):
        rates[procs] = throughput(procs, ARGS.parallel_files, i)
        print(f"  {procs} process(es): {rates[procs]:.1f} files/s ({rates[procs] / rates[1]:.2f}x one)", flush=True)
    print(
        f"  => two processes {rates[2] / rates[1]:.2f}x one (goal >= 1.3), four {rates[4] / rates[2]:.2f}x two (goal >= 1)"
    )
    print(f"done in {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
