"""Benchmark the runner's own overhead: a 3-K sweep, timed in Python, inside llama.cpp processes, and by llama.cpp.

Usage: python tests/bench/bench_orchestration.py [--qwen] [--n-predict 64] [--repeats 1] [--types code]
SmolLM2-135M drafts for itself by default; --qwen uses Qwen2.5-Coder-1.5B with the 0.5B as draft.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# the sweep's server measurements build the deployed command through registry.results.deploy, which reads Django's
# settings and models
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
import django  # noqa: E402

django.setup()

from runner import hardware  # noqa: E402
from runner.llama import binaries as llamacpp  # noqa: E402
from runner.llama import procs  # noqa: E402
from runner.prompts import load_task_set  # noqa: E402
from runner.sweep.sweep import SweepConfig, run_sweep  # noqa: E402
from tests.models import model_path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qwen", action="store_true", help="Qwen2.5-Coder 1.5B target + 0.5B draft")
    parser.add_argument("--ks", default="4,8,16")
    parser.add_argument("--n-predict", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=1, help="prompts per content type")
    parser.add_argument("--types", default="code", help="comma-separated content types")
    args = parser.parse_args()

    target, draft = (model_path("qwen15"), model_path("qwen05")) if args.qwen else (model_path("smollm2"),) * 2
    config = SweepConfig(
        str(target),
        str(draft),
        load_task_set(),
        content_types=tuple(args.types.split(",")),
        ks=tuple(int(k) for k in args.ks.split(",")),
        extend=False,
        prompts_per_type=args.prompts,
        n_predict=args.n_predict,
        repeats=args.repeats,
    )
    hw = hardware.detect()
    print(f"hardware: {hw['hardware_class']} ({hw['cpu_model']}); llama.cpp {llamacpp.build_info().label}")
    print(
        f"target {target.name}, draft {draft.name}, K {config.ks}, {config.n_predict} tokens, "
        f"{config.repeats} repeat(s), {config.prompts_per_type} prompt(s) per type {config.content_types}"
    )
    start = time.monotonic()
    result = run_sweep(config)
    total = time.monotonic() - start
    if result.status != "ok":
        print(f"sweep {result.status}: {result.error}")
    print(
        f"\n{'type':6} {'K':>3} {'plain t/s':>10} {'spec t/s':>9} {'speedup':>8} {'accept':>7} "
        f"{'acc/verif':>9} {'identical':>10} {'proc s':>7} {'llama s':>8} {'other cpu':>9}"
    )
    for c in result.cells:
        speed = f"{c.speedup:.2f}x" if c.speedup is not None else "-"
        acc = f"{100 * c.acceptance_rate:.1f}%" if c.acceptance_rate is not None else "-"
        mav = f"{c.mean_accepted_per_verification:.2f}" if c.mean_accepted_per_verification else "-"
        ident = "-" if c.identical is None else ("yes" if c.identical else f"no@{c.first_difference}")
        print(
            f"{c.cell.content_type:6} {c.cell.k:>3} {c.plain.median if c.plain else 0:>10.1f} "
            f"{c.spec.median if c.spec else 0:>9.1f} {speed:>8} {acc:>7} {mav:>9} {ident:>10} "
            f"{c.process_s:>7.2f} {c.llama_s:>8.2f} {100 * (c.other_cpu_share or 0):>8.0f}%"
        )
    for rec in result.recommendations:
        print(
            f"recommendation {rec.content_type}: {rec.summary} ({rec.reason})"
            + (f"\n  caveat: {rec.caveat}" if rec.caveat else "")
        )
    process = sum(c.process_s for c in result.cells)
    llama = sum(c.llama_s for c in result.cells)
    runs = sum(len(c.runs) for c in result.cells)
    print(f"\ntotal wall time             {total:8.2f} s  ({runs} llama.cpp processes)")
    print(f"inside llama.cpp processes  {process:8.2f} s")
    print(f"orchestration overhead      {total - process:8.2f} s  = {100 * (total - process) / total:.2f}% of total")
    print(
        f"llama.cpp's own timings     {llama:8.2f} s  (prompt + generation; the rest of the process time is "
        f"start-up and model loading: {100 * (process - llama) / process:.1f}%)"
    )


if __name__ == "__main__":
    procs.stop_on_termination()  # a terminated run leaves no llama-server behind
    main()
