"""An adapted draft against the original pair, predicted and measured side by side.

The near-miss pair is made from real weights: the target is Qwen2.5-Coder-1.5B-Instruct's file given
DeepSeek-R1-Distill's special tokens and BOS flag (tests.inspector.test_adapt_draft.r1_like, tensor data unchanged), which
llama.cpp refuses to pair with Qwen2.5-Coder-0.5B-Instruct; the draft is that 0.5B adapted to it by inspector.adapt
(``manage.py adapt_draft``'s code). Beside it, the original compatible pair: the same two sets of weights with their
own tokenizers. With the same weights the adapted pair's acceptance should fall within the original's measured
spread; what differs is the metadata (the target adds BOS: every prompt starts with another token) and seven
special ids, whose positions the prediction counts apart (``changed_tokens``). It proves the plumbing, not what an
adapted draft is worth for R1-Distill (that needs the real target's weights).

Usage: python tests/bench/bench_adapt.py [--quick] [--types code,prose] [--n-predict 96] [--repeats 2]
  default: draft-simple at K 2/4 and p-min 0 / 0.75, two prompts per content type, 96 tokens, two repeats;
  --quick: K 4, p-min 0, one code prompt, 32 tokens, one repeat.
Files are written to --work (default: build/bench-adapt, ~1.4 GB) and reused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from inspector.adapt import adapt  # noqa: E402
from inspector.spec_flags import Setting  # noqa: E402
from tests.bench import bench_predict  # noqa: E402  (sets Django up)
from tests.models import model_path  # noqa: E402
from tests.near_miss import r1_like  # noqa: E402


def files(work: Path) -> tuple[Path, Path]:
    """The near-miss target (real weights, R1's special tokens) and the draft adapted to it, made once."""
    work.mkdir(parents=True, exist_ok=True)
    target = work / "r1-like-qwen2.5-coder-1.5b-q4_k_m.gguf"
    if not target.is_file():
        r1_like(model_path("qwen15"), target, data=True, n_tokens=None)
    draft = work / "qwen2.5-coder-0.5b-adapted-for-r1-like.gguf"
    if not draft.is_file():
        result = adapt(str(target), model_path("qwen05"), draft)
        print(f"adapted: {result.plan.summary()}")
    return target, draft


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="code,prose")
    parser.add_argument("--n-predict", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--work", type=Path, default=Path("build/bench-adapt"))
    args = parser.parse_args()
    args.temperature = 0.0
    settings = [Setting("draft-simple", k, p) for p in (0.0, 0.75) for k in (2, 4)]
    if args.quick:
        args.types, args.n_predict, args.repeats, args.prompts = "code", 32, 1, 1
        settings = [Setting("draft-simple", 4, 0.0)]
    types = args.types.split(",")
    target, draft = files(args.work)
    original = bench_predict.compare("original pair", model_path("qwen15"), model_path("qwen05"), settings, types, args)
    adapted = bench_predict.compare("adapted pair", target, draft, settings, types, args)
    print("\n## Adapted against original (measured; predicted in brackets)\n")
    print("| type | setting | original acceptance | adapted acceptance | original speed-up | adapted speed-up | within the "
          "original's range |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---|")
    by_key = {(r[0], r[1]): r for r in original["rows"]}
    inside = []
    for r in adapted["rows"]:
        o = by_key.get((r[0], r[1]))
        if o is None:
            continue
        rng = o[6]
        ok = rng is not None and r[5] is not None and rng[0] <= r[5] <= rng[1]
        inside.append(ok)
        print(f"| {r[0]} | {r[1]} | {bench_predict.pct(o[3])} ({bench_predict.pct(o[2])}) | "
              f"{bench_predict.pct(r[3])} ({bench_predict.pct(r[2])}) | {bench_predict.times(o[5])} | "
              f"{bench_predict.times(r[5])} | {'yes' if ok else 'no'} |")  # fmt: skip
    accs = [(o[3], r[3]) for r in adapted["rows"] if (o := by_key.get((r[0], r[1]))) and o[3] and r[3]]
    if accs:
        gap = mean(abs(a - b) for a, b in accs) * 100
        print(f"\nmeasured acceptance: adapted against original differs by {gap:.1f} points on average")
    print(f"adapted speed-ups within the original's measured range: {sum(inside)} of {len(inside)}")
    for ctype, c in (adapted["changed"] or {}).items():
        print(f"{ctype}: changed-meaning tokens written by the target: {c['positions']}, draft proposed "
              f"{c['draft_agrees']} (rate {c['rate']}, overall {c['overall_rate']})")  # fmt: skip


if __name__ == "__main__":
    main()
