"""Registry scale benchmark on PostgreSQL: tokenizer families as the Hub has them.

One script per concern: bench_registry.py measures the table under load; this one measures how registration,
storage and the compatible-drafts query grow with files. It prints, per batch of registrations:
ms per file (mean and p95), files, base models, pairs (and how many have verdict "partial"), database size, the
compatible-drafts query (listed pairs and the base models answered from classes) for a target of the family, and
the table page (in-process, cache off: the first page, a sort, a search, a deep page of ?verdict=all, and
?verdict=partial pages timed apart), then the throughput of 1, 2 and 4 registering processes, projects 200,000
files from the batches, and times a hostile uploader adding tokenizer classes to a popular small draft.

    .venv/bin/python tests/bench/bench_scale.py [--one-family 1000] [--zipf-files 50000] [--families 100]
        [--hostile-files 50] [--no-near-misses]

Phase 1: one family of --one-family files (the worst case: every file a candidate of every other), as the
Hub holds a popular model: --bases-per-family base models (sizes 0.5B to 72B, instruct/coder/base), each
in several uploaders' repositories and quants. Phase 2: --zipf-files files in --families families whose
sizes follow Zipf's law (the largest holds at least 20%). Files are headers built in memory from the real
SmolLM2, Qwen2.5 and Gemma 3 vocabularies (each family changes one token, so it is its own vocabulary),
registered through registry.catalog.registration.register as an import would (no HTTP: bench_import's
concern). The database named by --db is dropped and created again.

Near-misses: a third of the base models have some uploads (every fifth copy) whose tokenizer is a near-miss of the
family's (the table padded by 64 tokens, a token's text changed above the index key's prefix, or BOS flipped), as
re-conversions by another llama.cpp or config have: such a base model holds several tokenizer classes, a pair
joining it has a verdict per combination of classes, and "partial" where some fail (--no-near-misses: one class
per base model, as before).

Phase 4 (--hostile-files, 0: skip): one uploader claims the smallest, most-listed draft base model, first by its
header (the same basename, size label and finetune), then by a Hub card whose base_model names the uploader's own
organisation (the header names another model), each file a near-miss class of its own. Printed: each
registration's time (mean, p95, max), the Pair rows it rewrote, the verdicts of that model's pairs, and whether the
files its pairs show (Pair.draft, Pair.target) moved: they should not, since a row shows the class of the
publisher and of the most distinct uploaders first (registry.catalog.combinations.Standing).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
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
    p.add_argument(
        "--parallel-files",
        type=int,
        default=300,
        help="files each process registers when timing 1/2/4 (0: skip that phase)",
    )
    p.add_argument(
        "--hostile-files", type=int, default=50, help="near-miss files a hostile uploader adds to one draft (0: skip)"
    )
    p.add_argument("--no-near-misses", action="store_true", help="every upload of a base model has its tokenizer")
    p.add_argument(
        "--job-files",
        type=int,
        default=10,
        help="files per import job, which ends by deciding adaptability (registration.finish; 0: never decide)",
    )
    p.add_argument(
        "--zipf-stop",
        type=int,
        default=0,
        help="stop the Zipf phase after this many files, then end (0: register them all); the plan is still that of "
        "--zipf-files, so the database is the one a full run holds at that point, kept for profiling",
    )
    return p.parse_args()


ARGS = parse_args()
os.environ["DATABASE_URL"] = f"{ARGS.server.rstrip('/')}/{ARGS.db}"
os.environ["DJANGO_SETTINGS_MODULE"] = "registry.settings"
os.environ["SPECREG_TABLE_CACHE_SECONDS"] = "0"  # the table page is timed with the cache off
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.db.models import Count, F, Q  # noqa: E402
from django.test import Client  # noqa: E402

from inspector.info import ModelInfo, inspect_source  # noqa: E402
from inspector.tokens import TokenTable as Tokens  # noqa: E402
from inspector.tokens import vocab_key  # noqa: E402
from registry.catalog import registration, stored  # noqa: E402
from registry.catalog.adaptable import decide_pending  # noqa: E402
from registry.catalog.listing import unlisted_partners  # noqa: E402
from registry.catalog.stored import load_info  # noqa: E402
from registry.hub.drafts import compatible_drafts  # noqa: E402
from registry.models import AdaptCheck, BaseClass, BaseModel, GGUFFile, Pair  # noqa: E402
from tests.bench.vocab_edit import pad, replace_token  # noqa: E402
from tests.models import model_path  # noqa: E402

SIZES = [("0.5B", 0.5), ("1.5B", 1.5), ("3B", 3), ("7B", 7), ("14B", 14), ("32B", 32), ("72B", 72)]
KINDS = ["Instruct", "Coder-Instruct", "", "Math-Instruct", "Abliterated", "Distill", "Uncensored"]
QUANTS = ["Q4_K_M", "Q8_0", "Q5_K_M", "Q6_K", "Q3_K_M", "IQ4_XS", "Q4_0", "Q2_K", "F16", "Q5_0"]

# A near-miss of a family's tokenizer: (kind, n). "padded": the table padded by n tokens (still compatible: at most
# 128 apart); "text": token 4096 + n's text changed, above the index key's prefix, so the file stays a candidate and
# fails on the token texts; "bos": BOS flipped in the header (fails on BOS from the class columns alone), with
# token 4096 + n changed too where n > 0 (a class of its own).
NearMiss = tuple[str, int]
NEAR_MISSES = ("padded", "text", "bos")
FAMILY_NEAR_MISS = {"padded": 64, "text": 1, "bos": 0}  # the variants uploads of a family carry (phases 1-3)


def near_miss_table(tokens: Tokens, near: NearMiss | None) -> Tokens:
    if near is None:
        return tokens
    kind, n = near
    if kind == "padded":
        return pad(tokens, n)
    if kind == "text" or n:
        i = 4096 + n
        return replace_token(tokens, i, tokens.text(i) + b"~near")
    return tokens


def with_tokenizer(real: ModelInfo, tokens: Tokens, near: NearMiss | None) -> ModelInfo:
    """``real``'s header with ``tokens`` as its table (and BOS flipped for a "bos" near-miss)."""
    info = ModelInfo.from_dict(real.to_dict(), tokens)
    tok, was = info.tokenizer, real.tokenizer
    assert tok is not None and was is not None
    tok.n_tokens, tok.vocab_key = tokens.count, vocab_key(tok.vocab_type, tokens)
    tok.table_sha256 = tokens.sha256
    if near is not None and near[0] == "bos":
        tok.add_bos = not was.add_bos
    return info


def file_near_miss(base_no: int, copy: int) -> NearMiss | None:
    """Some uploads of a third of the base models (every fifth copy) carry a near-miss tokenizer, of a kind by base
    model and copy: such a base model holds up to four classes (see the docstring)."""
    if ARGS.no_near_misses or base_no % 3 or copy % 5 != 4:
        return None
    kind = NEAR_MISSES[(base_no // 3 + copy // 5) % len(NEAR_MISSES)]
    return kind, FAMILY_NEAR_MISS[kind]


# ---- headers in memory ---------------------------------------------------------------------------
class Families:
    """Each family: its own vocabulary (one token changed) of one of three real tokenizers."""

    def __init__(self) -> None:
        self.real = [
            inspect_source(str(model_path("smollm2"))),
            inspect_source(str(model_path("qwen05", headers_only=True))),
            inspect_source(str(model_path("gemma3", headers_only=True))),
        ]
        self.tables: dict[tuple[int, NearMiss | None], tuple[ModelInfo, Tokens]] = {}

    def tokens(self, fam: int, near: NearMiss | None = None) -> tuple[ModelInfo, Tokens]:
        if (fam, near) not in self.tables:
            if near is None:
                base = self.real[0 if fam % 10 < 7 else 1 if fam % 10 < 9 else 2]
                i = 100 + fam % 3900  # below the key prefix: a vocabulary key of its own
                self.tables[fam, None] = (base, replace_token(base.tokens, i, base.tokens.text(i) + f"~{fam}".encode()))
            else:
                base, own = self.tokens(fam)
                self.tables[fam, near] = (base, near_miss_table(own, near))
        return self.tables[fam, near]

    def info(self, fam: int, base_no: int, params: int, near: NearMiss | None = None) -> ModelInfo:
        real, tokens = self.tokens(fam, near)
        info = with_tokenizer(real, tokens, near)
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
    info = fams.info(fam, base_no, 0, file_near_miss(base_no, copy))
    uploader, quant = copy // len(QUANTS), QUANTS[copy % len(QUANTS)]
    kind = info.metadata.get("general.finetune")
    name = f"{info.basename}-{info.size_label}" + (f"-{kind}" if kind else "")
    repo = f"uploader{uploader}/{name}-GGUF"
    path = f"{name}-{quant}.gguf"
    t0 = time.perf_counter()
    reg = registration.register(
        info, source=f"hf://{repo}/{path}", repo=repo, path=path, commit="0" * 40, etag=f"{repo}/{path}", size=1
    )
    elapsed = time.perf_counter() - t0
    JOB.append(reg.file.pk)
    return elapsed


JOB: list[int] = []  # the files of the current import job (JOB_FILES of them), decided at its end
JOB_FILES = ARGS.job_files


def end_job(decided: list[float]) -> None:
    """What an import job ends with (registration.finish's adaptability decisions), timed apart from registering:
    the time per file of the job."""
    if not JOB or not JOB_FILES:
        JOB.clear()
        return
    t0 = time.perf_counter()
    decide_pending(JOB)
    decided.append((time.perf_counter() - t0) / len(JOB))
    JOB.clear()


def job_line(decided: list[float]) -> str:
    return (
        f"    adaptability at each {JOB_FILES}-file job's end: {1000 * statistics.mean(decided):.1f} ms per file "
        f"(p95 of jobs {1000 * p95(decided):.1f}), {AdaptCheck.objects.count():,} decisions stored"
    )


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


SLOWEST: list[tuple[str, float]] = [("", 0.0)]  # the slowest table request of the last table_ms call
AUTOVACUUM = True  # set by main(): whether the server keeps planner statistics itself
TABLE_URLS = ["/", "/?sort=-ratio", "/?q=fam1-", "/?verdict=all&page=5", "/?verdict=incompatible"]
PARTIAL_URLS = ["/?verdict=partial", "/?verdict=partial&sort=-ratio&page=2", "/?verdict=partial&q=fam0-"]


def table_ms(client: Client, urls: list[str] = TABLE_URLS, n: int = 20) -> tuple[float, float]:
    """Median and p95 of n table requests, the URLs in turn."""
    times = []
    for i in range(n):
        url = urls[i % len(urls)]
        t0 = time.perf_counter()
        r = client.get(url)
        times.append(time.perf_counter() - t0)
        assert r.status_code == 200, (url, r.status_code)
        if times[-1] == max(times):
            SLOWEST[0] = (url, 1000 * times[-1])
    return 1000 * statistics.median(times), 1000 * p95(times)


def autovacuum_on() -> bool:
    with connection.cursor() as c:
        c.execute("SHOW autovacuum")
        return c.fetchone()[0] == "on"


def report(label: str, times: list[float], fam: int, client: Client) -> dict:
    if not AUTOVACUUM:
        # A server without autovacuum keeps the statistics of an empty database: the planner then hashes whole tables
        # for reads of a few rows (15 ms instead of 0.7 for a page's classes at 9,000 files). Production servers
        # analyse as tables grow; this does what autovacuum would, between batches (not timed).
        with connection.cursor() as c:
            c.execute("ANALYZE")
    row = {
        "label": label,
        "ms": 1000 * statistics.mean(times),
        "p95": 1000 * p95(times),
        "files": GGUFFile.objects.count(),
        "bases": BaseModel.objects.count(),
        "pairs": Pair.objects.count(),
        "partial": Pair.objects.filter(verdict=Pair.VERDICT_PARTIAL).count(),
        "mb": db_mb(),
        "drafts": drafts_ms(fam),
        "table": table_ms(client),
        "slowest": SLOWEST[0],
        "table_partial": table_ms(client, PARTIAL_URLS, n=12),
    }
    print(
        f"  {label:>14}: {row['ms']:6.1f} ms/file (p95 {row['p95']:6.1f}) | {row['files']:>6,} files "
        f"{row['bases']:>5,} base models {row['pairs']:>8,} pairs ({row['partial']:,} partial) {row['mb']:7.1f} MB "
        f"| drafts {row['drafts']:5.1f} ms | table {row['table'][0]:5.1f} ms (p95 {row['table'][1]:5.1f}), "
        f"?verdict=partial {row['table_partial'][0]:5.1f} ms (p95 {row['table_partial'][1]:5.1f}) "
        f"| slowest table request {row['slowest'][0]} {row['slowest'][1]:.0f} ms",
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


# ---- phase 4: a hostile uploader ---------------------------------------------------------------------
HOSTILE = "hostile-uploader"
SHOWN = ("verdict", "compatible", "failed_rule", "target_id", "draft_id")  # what a rewrite of a Pair row changes


def popular_draft(among: set[int]) -> tuple[BaseModel, int] | None:
    """The draft base model (of those ``among``) of the most listed compatible pairs (the smallest of those: listing
    favours small drafts), with that count."""
    row = (
        Pair.objects.filter(compatible=True, draft_base__in=among)
        .exclude(target_base=F("draft_base"))
        .values("draft_base")
        .annotate(listed=Count("pk"))
        .order_by("-listed", "draft_base__parameter_count", "draft_base")
        .first()
    )
    return None if row is None else (BaseModel.objects.get(pk=row["draft_base"]), row["listed"])


def hostile_near_miss(i: int) -> NearMiss:
    """The i-th hostile file's class: each distinct from every other and from the families' own variants."""
    kind = NEAR_MISSES[i % len(NEAR_MISSES)]
    return kind, (1 + i // len(NEAR_MISSES) if kind == "padded" else 8 + i)  # pads of 1..n/3 tokens, never 64


def hostile_phase(n: int, client: Client, among: set[int]) -> None:
    found = popular_draft(among)
    if found is None:
        print("phase 4: skipped (no listed draft)")
        return
    base, listed = found
    mine = Q(target_base=base) | Q(draft_base=base)

    def snapshot() -> dict[int, tuple]:
        return {pk: tuple(rest) for pk, *rest in Pair.objects.filter(mine).values_list("pk", *SHOWN)}

    def verdicts() -> str:
        rows = Pair.objects.filter(mine).values_list("verdict").annotate(n=Count("pk")).order_by("verdict")
        return ", ".join(f"{v} {c:,}" for v, c in rows) or "none"

    def owners() -> int:
        return GGUFFile.objects.filter(model__base=base).values("repo").distinct().count()

    # The header of a file of the model's most common class: a hostile file is a near-miss of what most uploads carry.
    template = load_info(BaseClass.objects.filter(base=base).order_by("-files", "pk").first().file)
    name = base.name
    print(
        f"phase 4 (after phases 1-3): a hostile uploader ({HOSTILE}) adds {n} files, each a near-miss class of its "
        f"own, to the draft base model {name} ({base.parameter_count / 1e9:.2f}B, draft of {listed:,} listed "
        f"compatible pairs, {BaseClass.objects.filter(base=base).count()} classes, {base.quants} files from "
        f"{owners()} repositories, publisher {base.publisher or '(none)'})",
        flush=True,
    )
    print(f"  pairs of {name} before: {verdicts()}")
    first = snapshot()
    halves = [("header", range(n // 2)), ("card", range(n // 2, n))]
    for claim, files in halves:
        if not files:
            continue
        times, rewrites, added, rewritten = [], [], 0, set()
        before = snapshot()
        for i in files:
            near = hostile_near_miss(i)
            info = with_tokenizer(template, near_miss_table(template.tokens, near), near)
            cards = None
            if claim == "card":  # the card alone claims the model: the header names another one
                info.basename, cards = f"Unrelated-{i}", [f"{HOSTILE}/{name}"]
            repo, path = f"{HOSTILE}/{name}-GGUF", f"{name}-nm{i}-Q4_K_M.gguf"
            was = snapshot()
            t0 = time.perf_counter()
            reg = registration.register(
                info,
                source=f"hf://{repo}/{path}",
                repo=repo,
                path=path,
                commit="0" * 40,
                etag=f"{repo}/{path}",
                size=1,
                base_models=cards,
            )
            times.append(time.perf_counter() - t0)
            assert reg.file.model.base_id == base.pk, f"{path} joined {reg.file.model.base}, not {name}"
            now = snapshot()
            changed = [pk for pk, v in now.items() if pk in was and was[pk] != v]
            rewrites.append(len(changed))
            rewritten |= set(changed)
            added += len(now.keys() - was.keys())
        after = snapshot()
        hostile_files = set(GGUFFile.objects.filter(repo__startswith=f"{HOSTILE}/").values_list("pk", flat=True))
        moved = [pk for pk, v in after.items() if pk in before and v[3:] != before[pk][3:]]
        shown = sum(1 for pk, v in after.items() if pk in before and (v[3] in hostile_files or v[4] in hostile_files))
        base.refresh_from_db()
        ms = [1000 * t for t in times]
        print(
            f"  claimed by {claim:6s}: {len(files)} registrations, mean {statistics.mean(ms):.1f} ms, "
            f"p95 {1000 * p95(times):.1f} ms, max {max(ms):.1f} ms per file | Pair rows rewritten: "
            f"{sum(rewrites):,} in all ({len(rewritten):,} distinct of {len(after):,}, at most {max(rewrites):,} by "
            f"one file), {added:,} new",
            flush=True,
        )
        print(
            f"    files the pairs show: {len(moved):,} of {len(before):,} pairs moved to other files, {shown:,} show a "
            f"{HOSTILE} file "
            f"({'unchanged: ok' if not moved and not shown else 'CHANGED'}) | {name} now "
            f"{BaseClass.objects.filter(base=base).count()} classes, publisher {base.publisher or '(none)'} "
            f"| pairs: {verdicts()}",
            flush=True,
        )
    last = snapshot()
    moved = sum(1 for pk, v in last.items() if pk in first and v[3:] != first[pk][3:])
    verdict_changed = sum(1 for pk, v in last.items() if pk in first and v[0] != first[pk][0])
    fam = int(m.group(1)) if (m := re.match(r"Fam(\d+)-", name)) else 0
    table, partial = table_ms(client), table_ms(client, PARTIAL_URLS, n=12)
    print(
        f"  => representative files moved on {moved:,} of {len(first):,} pairs (goal 0), verdict changed on "
        f"{verdict_changed:,}; compatible drafts for the family {drafts_ms(fam):.1f} ms, table {table[0]:.1f} ms "
        f"(p95 {table[1]:.1f}), ?verdict=partial {partial[0]:.1f} ms (p95 {partial[1]:.1f})"
    )


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


def parallel_phase() -> None:
    print("phase 3: registering processes (each its own files of one new family per process)", flush=True)
    rates = {}
    for i, procs in enumerate((1, 2, 4)):
        rates[procs] = throughput(procs, ARGS.parallel_files, i)
        print(f"  {procs} process(es): {rates[procs]:.1f} files/s ({rates[procs] / rates[1]:.2f}x one)", flush=True)
    print(
        f"  => two processes {rates[2] / rates[1]:.2f}x one (goal >= 1.3), four {rates[4] / rates[2]:.2f}x two (goal >= 1)"
    )


def main() -> None:
    from django.core.management import call_command

    server = ARGS.server.rstrip("/")
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{ARGS.db}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{ARGS.db}"')
    call_command("migrate", verbosity=0)
    global AUTOVACUUM
    AUTOVACUUM = autovacuum_on()
    if not AUTOVACUUM:
        print("autovacuum is off on this server: ANALYZE runs after each batch, as autovacuum would (not timed)")
    client = Client()
    fams = Families()
    started = time.monotonic()
    print(
        "table page timed in-process, cache off: "
        + ", ".join(TABLE_URLS)
        + "; ?verdict=partial apart: "
        + ", ".join(PARTIAL_URLS)
    )

    print(f"phase 1: one family of {ARGS.one_family:,} files over {ARGS.bases_per_family} base models", flush=True)
    items, rows, batch = plan_one_family(ARGS.one_family, ARGS.bases_per_family), [], []
    for n, (fam, b, c) in enumerate(items, start=1):
        stored._tables.clear() if n % 50 == 0 else None  # now and then a cold token-table cache
        batch.append(register_file(fams, fam, b, c))
        if not JOB_FILES or n % JOB_FILES == 0 or n == len(items):
            end_job([])
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
        if ARGS.zipf_stop:
            items = items[: ARGS.zipf_stop]
        decided: list[float] = []
        for n, (fam, b, c) in enumerate(items, start=1):
            t = register_file(fams, fam, b, c)
            batch.append(t)
            every.append(t)
            if JOB_FILES and n % JOB_FILES == 0:
                end_job(decided)
            if n % ARGS.zipf_batch == 0 or n == len(items):
                end_job(decided)
                zrows.append(report(f"+{n:,}", batch, 1, client))
                if decided:
                    print(job_line(decided), flush=True)
                batch, decided = [], []
        tables = [r["table"][1] for r in zrows]
        partials = [r["table_partial"][1] for r in zrows]
        print(
            f"  => registration p95 at {zrows[-1]['files']:,} files (the last batch) {zrows[-1]['p95']:.1f} ms (goal <= 50), "
            f"over the whole phase {1000 * p95(every):.1f} ms, table page p95 {max(tables):.1f} ms at "
            f"worst, ?verdict=partial p95 {max(partials):.1f} ms (goal < 100, cache off); MB per 1,000 files by batch: "
            + ", ".join(
                f"{1000 * (b['mb'] - a['mb']) / max(1, b['files'] - a['files']):.1f}"
                for a, b in zip(zrows, zrows[1:], strict=False)
            )
        )
        project(zrows)
        if ARGS.zipf_stop:
            print(f"stopped after {ARGS.zipf_stop:,} Zipf files; database {ARGS.db} kept")
            return
    else:
        project(rows)

    hub_like = set(BaseModel.objects.values_list("pk", flat=True))  # phase 3's models have one upload each

    if ARGS.parallel_files > 0:  # 0: no phase 3
        parallel_phase()
    if ARGS.hostile_files:
        hostile_phase(ARGS.hostile_files, client, hub_like)
    print(f"done in {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
