"""Benchmark the worst inputs for the team knowledge base: a /metrics server dripping its headers, and
import_kb of a 50 MB file.

Run: .venv/bin/python tests/bench/bench_hostile_team.py [--mb 50] [--deadlines 2,5] [--old-tree DIR]
(prints figures; goals in brackets). --old-tree: also import with the code in DIR (e.g. `git archive HEAD`
unpacked there), for the figures before.
Scrapes: seconds past the deadline for one scrape and for a beat round of 12 such servers. Imports run in a
fresh process on a fresh data folder each; memory is the peak resident set (VmHWM) minus the peak after imports.
"""

from __future__ import annotations

import argparse
import atexit
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


class Drip(http.server.BaseHTTPRequestHandler):
    """Status line and headers a byte every 0.5 s, for as long as the client listens."""

    def do_GET(self) -> None:
        try:
            for byte in b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"x" * 100_000:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass

    def log_message(self, *args) -> None:
        pass


def env_for(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SPECREG_INSTALLATION_ID", "CACHE_URL")}
    return {**env, "SPECREG_DATA_DIR": str(data), "DJANGO_SETTINGS_MODULE": "registry.settings"}


def manage(data: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env_for(data), check=True, capture_output=True, timeout=600
    )


def python(data: Path, code: str, *args: str, tree: Path = ROOT) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=tree,
        env={**env_for(data), "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return out.stdout


SCRAPES = """
import json, sys, time
import django
django.setup()
from django.utils import timezone
from registry.catalog.registration import register
from inspector.info import inspect_source
from registry.team.models import Deployment
from registry.team.telemetry import fetch, ScrapeError, scrape_active
url, deadline, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
started = time.monotonic()
try:
    fetch(url + "/metrics", timeout=deadline)
except ScrapeError as exc:
    why = str(exc)
one = time.monotonic() - started
f = register(inspect_source(sys.argv[4]), source="hf://org/m/m.gguf", repo="org/m", path="m.gguf", size=1).file
for _ in range(n):
    Deployment.objects.create(target=f, method="none", command="llama-server", url=url, author_name="bench",
                              deployed_at=timezone.now())
from django.conf import settings
settings.SPECREG_TELEMETRY_TIMEOUT_SECONDS = deadline
started = time.monotonic()
gaps = [s.error for s in scrape_active()]
print(json.dumps({"one": one, "why": why, "round": time.monotonic() - started, "gaps": gaps}))
"""

BASE_KB = """
import sys
import django
django.setup()
from inspector.info import inspect_source
from registry.kb.export import export_kb
from registry.models import BenchmarkResult, BenchmarkRun, Pair
from registry.catalog.registration import register
for path, name in ((sys.argv[1], "qwen05"), (sys.argv[2], "qwen15")):
    register(inspect_source(path), source=f"hf://org/{name}/{name}.gguf", repo=f"org/{name}", path=f"{name}.gguf",
             commit="0" * 40, size=1)
pair = Pair.objects.get()
run = BenchmarkRun.objects.create(pair=pair, queue="bench.cpu-2c", status="done", hardware_class="cpu-2c",
                                  build={"label": "b11434"}, summary={"status": "done"}, hardware={"cpus": 2})
for k in (4, 8):
    BenchmarkResult.objects.create(run=run, pair=pair, k=k, content_type="code", n_predict=64, repeats=3, n_prompts=2,
                                   status="ok", tokens_per_second=14.0, speedup=0.6, acceptance=0.7, drafted=100,
                                   accepted=70, identical=True, divergences=[], hardware="cpu", llama_cpp_build="b11434")
export_kb(sys.argv[3])
"""

IMPORT = """
import json, sys, time
import django
django.setup()
from registry.kb.importer import import_kb
import registry.team.kb_sections
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) * 1024
base = hwm()
started = time.monotonic()
report = import_kb(sys.argv[1])
print(json.dumps({"seconds": time.monotonic() - started, "peak": hwm() - base, "runs": report.counts["runs added"]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50, help="size of the knowledge-base file to import")
    parser.add_argument("--deadlines", default="2,5", help="scrape deadlines to try, in seconds")
    parser.add_argument("--servers", type=int, default=12, help="dripping deployments in the beat's round")
    parser.add_argument("--old-tree", type=Path, help="a checkout of the code before, to import with it too")
    args = parser.parse_args()

    # This process reads constants and the test's file generator (a test module importing Django models).
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    os.environ["SPECREG_DATA_DIR"] = data = tempfile.mkdtemp(prefix="bench-team-")
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    import django

    django.setup()
    from registry.team.telemetry import SCRAPE_THREADS
    from tests.models import model_path

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    print("A header-drip /metrics server (a byte every 0.5 s, never done)  [goal: at most 2 s past the deadline]")
    for deadline in (float(d) for d in args.deadlines.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            manage(Path(tmp), "migrate", "-v0")
            got = json.loads(
                python(Path(tmp), SCRAPES, url, str(deadline), str(args.servers), str(model_path("smollm2")))
            )
        waves = -(-args.servers // SCRAPE_THREADS)
        print(
            f"  deadline {deadline:g} s: one scrape {got['one']:.2f} s ({got['one'] - deadline:+.2f} s, {got['why']}); "
            f"beat round of {args.servers} ({waves} waves of {SCRAPE_THREADS} in parallel) {got['round']:.2f} s "
            f"({got['round'] - waves * deadline:+.2f} s past {waves} deadlines, {len(got['gaps'])} gaps)"
        )
    httpd.shutdown()

    from tests.knowledge_bases import large_kb

    print(
        f"import_kb of a {args.mb:g} MB file  [goal: memory flat, about one record; time no worse than parsing it whole]"
    )
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        manage(d / "a", "migrate", "-v0")
        python(
            d / "a",
            BASE_KB,
            str(model_path("qwen05", headers_only=True)),
            str(model_path("qwen15", headers_only=True)),
            str(d / "base.json"),
        )
        doc = json.loads((d / "base.json").read_text())
        for shape in ("summaries", "divergences"):
            kb = d / f"{shape}.json"
            large_kb(doc, kb, args.mb, shape=shape)
            for label, tree in (("now", ROOT), ("before", args.old_tree)):
                if tree is None:
                    continue
                data = d / f"{shape}-{label}"
                manage(data, "migrate", "-v0")
                got = json.loads(python(data, IMPORT, str(kb), tree=tree))
                print(
                    f"  {shape:<12} {label:<6} {kb.stat().st_size / 1e6:5.1f} MB, {got['runs']:,} runs: "
                    f"{got['seconds']:5.1f} s, peak memory +{got['peak'] / 2**20:,.0f} MiB"
                )
    print(
        "  (divergences: the peak is the pair's best-result refresh at the end, registry.results.figures.figures_for, which\n"
        "   reads every result of the pair with its divergences at once; the streamed part stays ~50 MiB)"
    )


if __name__ == "__main__":
    main()
