"""Speculation under load: SmolLM2-135M drafting for itself and with ngram-mod, at 1, 2 and 4 concurrent clients.

Usage: python tests/bench/bench_load.py [--clients 1,2,4] [--types code,edit] [--n-predict 96] [--repeats 2]
       [--quick]  (one content type, 1 and 2 clients, 16 tokens, one repeat: checks the script runs)

Per cell (runner.measure.load through measure_cell, exactly what run_benchmark --via server --clients measures): the
plain and speculative servers' aggregate tokens per second (all clients' tokens over each round's wall time), the
speedup at that concurrency, the speculative p95 latency of a request and the plain one's, acceptance, the share of
outputs unlike the single-client plain output, and the CPU time of specreg's own client loop (this process: the
client threads, HTTP and JSON) beside the servers' (their processes, reaped when each cell ends).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
import django  # noqa: E402

django.setup()

from inspector.spec_flags import Setting  # noqa: E402
from runner import hardware  # noqa: E402
from runner.llama import binaries as llamacpp  # noqa: E402
from runner.llama import procs  # noqa: E402
from runner.measure.cli import Cell, measure_cell  # noqa: E402
from runner.prompts import load_task_set, read_chat_template, render_prompt  # noqa: E402
from tests.models import model_path  # noqa: E402

HEADER = (
    "| type | setting | clients | plain t/s | spec t/s | speed-up | p95 spec s | p95 plain s | acceptance | "
    "outputs differ | client CPU s | server CPU s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,2,4")
    ap.add_argument("--types", default="code,edit")
    ap.add_argument("--n-predict", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.clients, a.types, a.n_predict, a.repeats = "1,2", "code", 16, 1
    model = str(model_path("smollm2"))
    caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SERVER))
    hw = hardware.detect()
    build = llamacpp.build_info()
    print(f"SmolLM2-135M on {hw.get('cpu_model', '?')} ({hw.get('cpu_cores', '?')} cores), llama.cpp {build.label}")
    print(f"built for {build.isa or '?'}; {a.n_predict} tokens, {a.repeats} repeat(s), temperature 0\n")
    print(HEADER)
    tasks = load_task_set()
    template = read_chat_template(model)
    settings = [Setting("draft-simple", 4, 0.0), Setting("ngram-mod", 16, None, (("--spec-ngram-mod-n-match", "24"),))]
    for content_type in a.types.split(","):
        for setting in settings:
            for clients in [int(c) for c in a.clients.split(",")]:
                chosen = tasks.by_type(content_type)[: max(2, clients)]
                prompts = tuple(render_prompt(t.prompt, template, t.system).text for t in chosen)
                cell = Cell(
                    model,
                    model if setting.method == "draft-simple" else "",
                    setting.k,
                    prompts,
                    p_min=setting.p_min,
                    n_predict=a.n_predict,
                    repeats=a.repeats,
                    content_type=content_type,
                    method=setting.method,
                    options=setting.options,
                    via="server",
                    clients=clients,
                )
                mine0, kids0 = time.process_time(), os.times()
                c = measure_cell(cell, server_caps=caps)
                mine = time.process_time() - mine0
                kids1 = os.times()
                servers = (kids1.children_user - kids0.children_user) + (kids1.children_system - kids0.children_system)
                if c.status != "ok":
                    print(f"| {content_type} | {setting.label} | {clients} | {c.status}: {c.error} |")
                    continue
                load = c.load
                p95 = load.latency_p95 if load else max((r.wall_s for r in c.runs if r.kind == "spec"), default=0)
                p95_plain = (
                    load.baseline_latency_p95
                    if load
                    else max((r.wall_s for r in c.runs if r.kind == "plain"), default=0)
                )
                differ = f"{load.differing_share:.0%}" if load and load.differing_share is not None else "-"
                speed = f"{c.speedup:.2f}x" if c.speedup is not None else "-"
                acc = f"{c.acceptance_rate:.0%}" if c.acceptance_rate is not None else "-"
                print(
                    f"| {content_type} | {setting.label} | {clients} | {c.plain.median:.1f} | {c.spec.median:.1f} | "
                    f"{speed} | {p95:.2f} | {p95_plain:.2f} | {acc} | {differ} | {mine:.2f} | {servers:.1f} |"
                )
    print("\nAt one client the speeds are per request (median); from two clients on, aggregate over each round.")
    return 0


if __name__ == "__main__":
    procs.stop_on_termination()  # a terminated run leaves no llama-server behind
    sys.exit(main())
