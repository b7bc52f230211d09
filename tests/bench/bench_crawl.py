"""Crawl benchmark: import_hf --author through one real Celery worker against the test Hub.

One script per concern: bench_scale.py measures registration and storage as files grow (no HTTP); this one
measures a crawl end to end: the Hub's paged listing, one task per repository, headers read by Range requests
over a network with --latency seconds added to every request (both the Hub and its CDN), and registration on
PostgreSQL. It prints, while the crawl runs and at its end: files registered, files per hour, HTTP requests per
file, the header bytes read against the files' header sizes (magic to the end of the tensor infos), and the CPU
seconds of the worker; then the same crawl again, when every file is unchanged.

    .venv/bin/python tests/bench/bench_crawl.py [--repos 60] [--files-per-repo 10] [--latency 0.05]
        [--concurrency 4] [--per-host 4]

The repositories hold real headers (SmolLM2's whole 98 MB file; Qwen2.5-Coder-0.5B's and Gemma 3's headers
followed by 400 MB of sparse tensor data), in three tokenizer families, with a base model per three
repositories named in their card, as uploaders' quants are. The database named by --db is dropped and created
again; the broker is the embedded filesystem one, in a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL (no database)")
    p.add_argument("--db", default="specreg_crawl")
    p.add_argument("--repos", type=int, default=60)
    p.add_argument("--files-per-repo", type=int, default=10)
    p.add_argument("--latency", type=float, default=0.05, help="seconds added to every HTTP request")
    p.add_argument("--concurrency", type=int, default=4, help="threads of the crawl worker")
    p.add_argument("--per-host", type=int, default=4, help="SPECREG_CRAWL_PER_HOST")
    p.add_argument("--page-size", type=int, default=1000, help="models per page of the Hub's listing")
    return p.parse_args()


ARGS = parse_args()
DATA = Path(tempfile.mkdtemp(prefix="bench-crawl-"))
os.environ.update(
    {
        "DATABASE_URL": f"{ARGS.server.rstrip('/')}/{ARGS.db}",
        "DJANGO_SETTINGS_MODULE": "registry.settings",
        "SPECREG_DATA_DIR": str(DATA),
        "SPECREG_QUEUE_PREFIX": f"bench{uuid.uuid4().hex[:6]}.",
        "SPECREG_CRAWL_PER_HOST": str(ARGS.per_host),
        "SPECREG_MAX_ACTIVE_CRAWLS": "5",
        "HF_HOME": str(DATA / "hf"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
)
os.environ.pop("CELERY_BROKER_URL", None)
for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
    os.environ.pop(name, None)

import psycopg  # noqa: E402

with psycopg.connect(f"{ARGS.server.rstrip('/')}/postgres", autocommit=True) as admin:
    admin.execute(f'DROP DATABASE IF EXISTS "{ARGS.db}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{ARGS.db}"')

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from registry.hub import crawl as crawls  # noqa: E402
from registry.models import Crawl, GGUFFile  # noqa: E402
from tests.hub import FakeHub  # noqa: E402
from tests.models import model_path  # noqa: E402

QUANTS = ["Q2_K", "Q3_K_M", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_0", "Q6_K", "Q8_0", "F16", "IQ4_XS", "IQ3_M"]


def sources() -> list[Path]:
    """The three headers, each in a file with tensor data after it (sparse: no disk spent), as on the Hub."""
    out = [model_path("smollm2")]
    for key in ("qwen05", "gemma3"):
        header = model_path(key, headers_only=True).read_bytes()
        path = DATA / f"{key}.gguf"
        path.write_bytes(header)
        os.truncate(path, len(header) + (400 << 20))
        out.append(path)
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def crawl_once(hub: FakeHub, worker: subprocess.Popen, label: str) -> None:
    hub.reset_counts()
    cpu0, t0 = cpu_seconds(worker.pid), time.monotonic()
    crawl = crawls.start(Crawl.AUTHOR, "bench")
    last = 0.0
    while True:
        crawl.refresh_from_db()
        p = crawls.progress(crawl)
        if crawl.finished:
            break
        if time.monotonic() - last > 15:
            files = p.added + p.updated + p.unchanged + p.failed_files
            rate = files / (time.monotonic() - t0) * 3600
            print(
                f"  {label}: {time.monotonic() - t0:6.0f} s, {p.finished_repos}/{p.found} repositories, {files} files, {rate:,.0f} files/h",
                flush=True,
            )
            last = time.monotonic()
        time.sleep(1)
    elapsed = time.monotonic() - t0
    cpu = cpu_seconds(worker.pid) - cpu0
    files = p.added + p.updated + p.unchanged + p.failed_files
    requests = {role: sum(1 for r in hub.requests if r.server == role) for role in ("hub", "cdn")}
    served = sum(hub.bytes_served(repo, path) for repo, r in hub.repos.items() for path in r.files)
    headers = sum(GGUFFile.objects.filter(repo__startswith="bench/").values_list("header_size", flat=True))
    print(f"{label}: crawl {crawl.pk} {crawl.status}; {p.line()}")
    print(
        f"  {files} files in {elapsed:.1f} s (from queueing to the last repository): {files / elapsed * 3600:,.0f} files/hour; "
        f"worker CPU {cpu:.1f} s ({cpu / max(files, 1) * 1000:.0f} ms/file)"
    )
    print(
        f"  requests: {requests['hub']} to the Hub, {requests['cdn']} to its CDN "
        f"({(requests['hub'] + requests['cdn']) / max(files, 1):.2f} per file); "
        f"header bytes read {served / 1e6:,.1f} MB for {headers / 1e6:,.1f} MB of headers"
        + (f" = {served / headers:.3f}x" if headers and served else "")
    )


def main() -> None:
    call_command("migrate", verbosity=0)
    files = sources()
    hub = FakeHub()
    hub.page_size = ARGS.page_size
    total = 0
    for r in range(ARGS.repos):
        src = files[r % 3]
        names = {
            f"model{r:04d}-{QUANTS[q % len(QUANTS)]}-{q // len(QUANTS)}.gguf": src for q in range(ARGS.files_per_repo)
        }
        hub.add_repo(f"bench/Model{r:04d}-GGUF", names, base_model=f"base/Model{r // 3}")
        total += len(names)
    hub.latency_seconds = ARGS.latency
    os.environ["HF_ENDPOINT"] = hub.url
    print(
        f"{ARGS.repos} repositories, {total} files; {ARGS.latency * 1000:.0f} ms added to every request; "
        f"one worker, --pool threads --concurrency {ARGS.concurrency}; {ARGS.per_host} per host; PostgreSQL",
        flush=True,
    )
    queue = f"{os.environ['SPECREG_QUEUE_PREFIX']}crawl"
    cmd = [sys.executable, "-m", "celery", "-A", "runner", "worker", "-Q", queue, "--pool", "threads"]
    cmd += ["--concurrency", str(ARGS.concurrency), "--without-gossip", "--without-mingle", "--loglevel", "WARNING"]
    with open(DATA / "worker.log", "w") as log:
        worker = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        crawl_once(hub, worker, "first crawl")
        crawl_once(hub, worker, "again (every file unchanged)")
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        hub.close()
    print(f"(worker log: {DATA / 'worker.log'})")


if __name__ == "__main__":
    main()
