"""Every speculation method available here on one target: the n-gram family and a draft model, per content type.

Usage: python tests/bench/bench_methods.py [--types code,edit,prose] [--n-predict 128] [--repeats 3]
       [--full]  (every setting run_benchmark sweeps; default: one setting per method, see quick_settings)
       [--via cli|server]  (the command-line tools, or two llama-servers started with the deployed flags)
       [--quick]  (SmolLM2 drafting for itself and ngram-mod, one code prompt, 8 tokens: checks the script runs)
Qwen2.5-Coder-1.5B-Instruct Q4_K_M is the target and its 0.5B sibling the draft (tests/data/model-wheels.txt).
Plain and speculative runs alternate per prompt and repeat (A B A B), as in every benchmark; the table
gives medians, acceptance, and the share of the CPU other work used meanwhile (a noisy machine shows).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# --via server builds the deployed command through registry.results.deploy, which reads Django's settings and models
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
import django  # noqa: E402

django.setup()

from inspector.spec_flags import NGRAM_SWEEP, Setting  # noqa: E402
from runner import hardware  # noqa: E402
from runner.llama import binaries as llamacpp  # noqa: E402
from runner.llama import procs  # noqa: E402
from runner.measure.cli import measure_cell  # noqa: E402
from runner.methods import settings_for  # noqa: E402
from runner.prompts import load_task_set  # noqa: E402
from runner.sweep.sweep import SweepConfig, run_sweep  # noqa: E402
from tests.models import model_path  # noqa: E402

DEFAULT_LOOKUP = {"ngram-mod": "24", "ngram-simple": "12", "ngram-map-k": "12", "ngram-map-k4v": "12"}


def quick_settings() -> list[Setting]:
    """One setting per method: the draft model at K=4 (p-min 0), each n-gram method at its default lookup
    length with a short draft (16 for ngram-mod, whose drafts must reach n_min), and ngram-cache."""
    out = [Setting("draft-simple", 4, 0.0)]
    for method, (_, _, flag, _) in NGRAM_SWEEP.items():
        out.append(Setting(method, 16 if method == "ngram-mod" else 8, None, ((flag, DEFAULT_LOOKUP[method]),)))
    return out + [Setting("ngram-cache", 8)]


HEADER = "| type | setting | plain t/s | spec t/s | speed-up | acceptance | identical | other CPU |\n|---|---|---:|---:|---:|---:|---|---:|"


def row(c) -> str:
    speed = f"{c.speedup:.2f}x" if c.speedup is not None else "-"
    acc = f"{100 * c.acceptance_rate:.0f}%" if c.acceptance_rate is not None else "-"
    ident = "-" if c.identical is None else ("yes" if c.identical else f"no@{c.first_difference}")
    plain = f"{c.plain.median:.1f} ({c.plain.min:.1f}-{c.plain.max:.1f})" if c.plain else "-"
    spec = f"{c.spec.median:.1f} ({c.spec.min:.1f}-{c.spec.max:.1f})" if c.spec else "-"
    return (
        f"| {c.cell.content_type} | {c.cell.setting.label} | {plain} | {spec} | {speed} | {acc} | {ident} | "
        f"{100 * (c.other_cpu_share or 0):.0f}% |" + (f" {c.error}" if c.error else "")
    )


def measure_and_print(cell, **kw):
    """Each cell's row as soon as it is measured (a long benchmark shows its progress)."""
    c = measure_cell(cell, **kw)
    print(row(c), flush=True)
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="code,edit,prose")
    parser.add_argument("--n-predict", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=1, help="prompts per content type")
    parser.add_argument("--full", action="store_true", help="every setting run_benchmark sweeps by default")
    parser.add_argument("--via", choices=("cli", "server"), default="cli", help="how to measure (run_benchmark --via)")
    parser.add_argument("--quick", action="store_true", help="SmolLM2, two settings, one code prompt, 8 tokens")
    args = parser.parse_args()

    target, draft = model_path("qwen15"), model_path("qwen05")
    settings = quick_settings()
    if args.quick:
        target = draft = model_path("smollm2")
        settings = [Setting("draft-simple", 2, 0.0), Setting("ngram-mod", 16, None)]
        args.types, args.n_predict, args.repeats, args.prompts = "code", 8, 1, 1
    if args.full:
        settings = [
            s for m in ("draft-simple", *NGRAM_SWEEP, "ngram-cache") for s in settings_for(m, [4, 8, 16], [0.0, 0.75])
        ]
    config = SweepConfig(
        str(target),
        str(draft),
        load_task_set(),
        content_types=tuple(args.types.split(",")),
        extend=False,
        prompts_per_type=args.prompts,
        n_predict=args.n_predict,
        repeats=args.repeats,
        settings=tuple(settings),
        via=args.via,
    )
    hw = hardware.detect()
    build = llamacpp.build_info()
    print(f"hardware: {hw['hardware_class']} ({hw['cpu_model']}); llama.cpp {build.label} built for {build.isa or '?'}")
    print(
        f"target {target.name}, draft {draft.name}, {len(settings)} settings, {config.n_predict} tokens, "
        f"{config.repeats} repeat(s), {config.prompts_per_type} prompt(s) per type {config.content_types}, "
        f"measured via {config.via}"
    )
    start = time.monotonic()
    print("\n" + HEADER, flush=True)
    result = run_sweep(config, measure=measure_and_print)
    if result.status != "ok":
        print(f"sweep {result.status}: {result.error}")
    print()
    for rec in result.recommendations:
        print(
            f"recommendation {rec.content_type}: {rec.summary} ({rec.reason})"
            + (f"\n  caveat: {rec.caveat}" if rec.caveat else "")
        )
    print(f"\nwhole benchmark: {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    procs.stop_on_termination()  # a terminated run leaves no llama-server behind
    main()
