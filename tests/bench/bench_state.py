"""Recurrent and hybrid pairs, predicted and measured side by side, and the CLI's printed acceptance beside the real one.

The pairs are tests.tinystate's: a 2-layer Mamba-2 (recurrent) and a 2-layer LFM2 (hybrid), 64 wide, random weights,
Qwen2.5's real tokenizer, each drafting for itself and drafted for by a noisy copy of itself (Mamba-2: noise 2.0,
LFM2: noise 0.7), so that acceptance is neither 0 nor 1. llama.cpp runs both with checkpoints. No real hybrid model is on this machine: these
figures show that specreg measures and predicts such pairs the way llama.cpp runs them, not what a real Qwen3.5 or
LFM2 pair gains.

Per pair: the prediction (llama.cpp's checkpoint branch replayed, the checkpoint's save and restore timed) beside the
measured sweep (bench_predict.compare), then, per setting, the acceptance llama-speculative-simple prints, the one
counted round by round (what specreg stores) and llama-server's draft_n_accepted / draft_n on the same prompts; last,
the chain ngram-mod+draft-simple measured beside its parts on the noisy Mamba-2 pair (run_benchmark's sweep and
recommendation).

Usage: python tests/bench/bench_state.py [--quick] [--types code,prose] [--n-predict 64] [--repeats 2]
  --quick: K 4, one code prompt, 32 tokens, one repeat.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.bench import bench_predict  # noqa: E402, I001  (sets Django up: first)
from inspector.spec_flags import Setting  # noqa: E402
from runner.llama import binaries, procs  # noqa: E402
from runner.measure.cli import Cell, measure_cell  # noqa: E402
from runner.methods import settings_for  # noqa: E402
from runner.predict.runs import trimmed_tasks  # noqa: E402
from runner.prompts import load_task_set, render_prompt  # noqa: E402
from runner.sweep.sweep import SweepConfig, run_sweep  # noqa: E402
from tests.tinystate import lfm2, mamba2  # noqa: E402

PAIRS = {
    "mamba2 (recurrent) drafting for itself": lambda: (mamba2(), mamba2()),
    "mamba2 (recurrent)": lambda: (mamba2(), mamba2("mamba2-tiny-noise2", seed=7, noise=2.0, base_seed=0)),
    "lfm2 (hybrid) drafting for itself": lambda: (lfm2(), lfm2()),
    "lfm2 (hybrid)": lambda: (lfm2(), lfm2("lfm2-tiny-noise0.7", seed=7, noise=0.7, base_seed=0)),
}
CHAIN_METHODS = ("draft-simple", "ngram-mod", "ngram-mod+draft-simple")


def printed_acceptance(target: Path, draft: Path, prompts: list[str], k: int, n_predict: int) -> float | None:
    """What llama-speculative-simple prints itself (its n_accept / n_drafted), summed over the prompts."""
    caps = binaries.capabilities(binaries.find_binary(binaries.SPECULATIVE))
    drafted = accepted = 0
    for prompt in prompts:
        gen = binaries.GenParams(n_predict=n_predict, threads=2)
        argv = binaries.method_argv(caps, target, draft, prompt, gen, Setting("draft-simple", k, None))
        r = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=600)
        drafted += int(r.stderr.split("n_drafted = ")[1].split()[0])
        accepted += int(r.stderr.split("n_accept  = ")[1].split()[0])
    return accepted / drafted if drafted else None


def three_counts(target: Path, draft: Path, types: list[str], ks: list[int], args) -> None:
    tasks = trimmed_tasks(load_task_set(), types, args.prompts)
    prompts = [render_prompt(t.prompt, None, t.system).text for c in types for t in tasks.by_type(c)]
    print("\n| K | printed by llama-speculative-simple | counted per round (CLI) | llama-server |")
    print("|---:|---:|---:|---:|")
    for k in ks:
        shown = printed_acceptance(target, draft, prompts, k, args.n_predict)
        cli = measure_cell(Cell(str(target), str(draft), k, tuple(prompts), n_predict=args.n_predict, repeats=1))
        srv = measure_cell(
            Cell(str(target), str(draft), k, tuple(prompts), n_predict=args.n_predict, repeats=1, via="server")
        )
        print(f"| {k} | {bench_predict.pct(shown)} | {bench_predict.pct(cli.acceptance_rate)} | "
              f"{bench_predict.pct(srv.acceptance_rate)} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="code,prose")
    parser.add_argument("--n-predict", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    args.temperature = 0.0
    ks = [2, 4]
    if args.quick:
        args.types, args.n_predict, args.repeats, args.prompts, ks = "code", 32, 1, 1, [4]
    settings = [Setting("draft-simple", k, 0.0) for k in ks]
    types = args.types.split(",")
    for label, make in PAIRS.items():
        target, draft = make()
        bench_predict.compare(label, target, draft, settings, types, args)
        three_counts(target, draft, types, ks, args)
    chain_beside_parts(*PAIRS["mamba2 (recurrent)"](), types, args)


def chain_beside_parts(target: Path, draft: Path, types: list[str], args) -> None:
    """The chain and its parts, measured in one sweep, and what the sweep recommends."""
    tasks = trimmed_tasks(load_task_set(), types, args.prompts)
    settings = tuple(s for m in CHAIN_METHODS for s in settings_for(m, [4], [0.0]))
    config = SweepConfig(
        str(target), str(draft), tasks, content_types=tuple(types), extend=False, prompts_per_type=args.prompts,
        n_predict=args.n_predict, repeats=args.repeats, settings=settings, temperatures=(0.0,),
    )  # fmt: skip
    result = run_sweep(config)
    print(f"\n## the chain beside its parts: {target.name} + {draft.name}\n")
    print("| type | setting | speed-up | slowest pair | acceptance |")
    print("|---|---|---:|---:|---:|")
    for c in result.cells:
        low = c.pair_speedups.min if c.pair_speedups else None
        print(f"| {c.cell.content_type} | {c.cell.setting.label} | {bench_predict.times(c.speedup)} | "
              f"{bench_predict.times(low)} | {bench_predict.pct(c.acceptance_rate)} |")  # fmt: skip
    for r in result.recommendations:
        print(f"{r.content_type}: {r.reason}" + (f" ({r.caveat})" if r.caveat else ""))


if __name__ == "__main__":
    procs.stop_on_termination()  # a terminated run leaves no llama-server behind
    main()
