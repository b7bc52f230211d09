"""Prediction against measurement, side by side: how far runner.predict.prediction is from real llama.cpp runs, and how much
faster it is than measuring.

Usage: python tests/bench/bench_predict.py [--quick] [--types code,prose] [--n-predict 96] [--repeats 2]
                                           [--temperature T] [--part all|draft|draftless] [--ngram-target smollm2|qwen15]
                                           [--untied]
  default: the draftless methods on SmolLM2-135M (ngram-mod, ngram-map-k, ngram-simple; --ngram-target qwen15: on
           Qwen2.5-Coder-1.5B), then Qwen2.5-Coder-1.5B + 0.5B, draft-simple at K 2/4/8 and p-min 0 / 0.75, two prompts
           per content type, 96 tokens;
  --quick: SmolLM2 drafting for itself at K 2 and ngram-mod, one code prompt, 24 tokens, one repeat;
  --untied: per content type, the prompts (of all the type's) whose target answer reaches a margin under 0.25 logits
           latest, chosen from the prediction's transcripts before anything is measured: where a real run is expected
           to write the predicted text longest, so that the comparison times the same text on both sides;
  --temperature T (above 0): the draft-model settings only, predicted as expected counts over a sampled transcript
           and measured at T (one sample per prompt and repeat: the measured acceptance is itself noisy).
Each setting is predicted (transcript; one teacher-forced pass of the draft for the draft-model settings, checked
against the exact replay through llama.cpp's own speculative loop, which the n-gram methods always take; cost
model) and then
measured (plain and speculative runs alternating, A B A B, --repeats times); the draftless methods add the edit
content type, where they find drafts. Printed per setting: predicted and
measured acceptance and speedup; then the mean and worst absolute errors over settings whose plain and speculative
texts agree (a parted text timed another text), whether the predicted best is the measured best per content type,
and the prediction's time (transcript, replay and cost model apart) against the measurement's.
With SPECREG_RESIDUAL_FIT=1 the pair's rounds are timed at K 8 too, and the same predictions' speed-up error is printed
under every residual model (none, per call at K 4, the line through both K, the shape that fits).
Requirements: acceptance within 3 points on average and 5 at worst, speedup within 10% / 15%, the
predicted best within 5% of the measured best (or its spread), prediction at least 10x faster than measuring once
the transcript exists.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
import django  # noqa: E402

django.setup()

from inspector.spec_flags import Setting  # noqa: E402
from runner import hardware  # noqa: E402
from runner.llama import binaries as llamacpp  # noqa: E402
from runner.llama import procs  # noqa: E402
from runner.measure.cells import CellResult  # noqa: E402
from runner.predict.prediction import CostModel, Prediction, first_ties, per_round, predict  # noqa: E402
from runner.predict.round_cost import FIT_K, ROUND_K, Fit, fit  # noqa: E402
from runner.predict.runs import trimmed_tasks  # noqa: E402
from runner.prompts import TaskSet, load_task_set  # noqa: E402
from runner.sweep.sweep import SweepConfig, run_sweep  # noqa: E402
from tests.models import model_path  # noqa: E402

# Margins (logits) that verify batches have been seen to flip, with some room: a parted text's first differing token
# had a margin of about a tenth of a logit, and up to a fifth (docs/benchmarks.md, "Where predicted acceptance parts
# from measured")
FLIPS_BELOW = 0.25

HEADER = (
    "| type | setting | predicted acc | measured acc | predicted speed-up | measured speed-up | measured range | error "
    "| same text |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---|"
)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def times(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def measured_range(c: CellResult) -> tuple[float, float] | None:
    """The slowest and fastest speedup the repeats allow: slowest speculative against fastest plain run, and the
    other way round (interleaved runs: a machine's drift moves both)."""
    if not c.plain or not c.spec or not c.speedup:
        return None
    return c.spec.min / c.plain.max, c.spec.max / c.plain.min


def spread(c: CellResult) -> float:
    """The measured speedup's relative spread: half the measured range over the speedup."""
    r = measured_range(c)
    return 0.0 if r is None or not c.speedup else (r[1] - r[0]) / 2 / c.speedup


def residual_models(costs: CostModel) -> dict[str, Callable[[Prediction], float]]:
    """Each way of pricing a round's residual that specreg used or uses, as seconds over a setting's counts (rounds,
    decode calls, drafted tokens; step_seconds' floor left out): none; per decode call at K 4, kept above zero
    (until 2026-11-29) and signed; the line through K 4 and 8, kept above zero (until 2026-11-29) and signed; and the
    shape of round_cost.fit that fits the two K best (what prediction uses)."""
    per_call = costs.extra_per_call_s
    out: dict[str, Callable[[Prediction], float]] = {"none": lambda p: 0.0}
    if per_call is None:
        return out
    out["per call at K 4, above zero"] = lambda p: max(0.0, per_call) * p.calls
    out["per call at K 4, signed"] = lambda p: per_call * p.calls
    points = list(costs.residual_points)
    if len(points) < 2:
        return out
    (k1, r1), (k2, r2) = points[:2]
    b = (r2 - r1) / (k2 - k1)
    a = r1 - b * k1
    low = _line_above_zero(a, b, points[:2])
    out["line through both K, above zero"] = lambda p: low[0] * p.rounds + low[1] * p.drafted
    out["line through both K, signed"] = lambda p: a * p.rounds + b * p.drafted
    shape = fit(points)
    if shape is not None:
        out[f"the shape that fits ({shape.describe()})"] = lambda p: shape.price(p.rounds, p.drafted, p.calls)
    return out


def _line_above_zero(a: float, b: float, points: list[tuple[int, float]]) -> tuple[float, float]:
    """round_cost.fit as it was until 2026-11-29: the line through both K, neither part below zero."""
    if b < 0:
        return max(0.0, sum(r for _, r in points) / len(points)), 0.0
    if a < 0:
        return 0.0, max(0.0, sum(k * r for k, r in points) / sum(k * k for k, _ in points))
    return a, b


def untied_tasks(target: Path, settings: list[Setting], types: list[str], args) -> tuple[TaskSet, float]:
    """Per content type, the ``args.prompts`` prompts whose target answer reaches a margin under FLIPS_BELOW latest
    (prediction.first_ties, from the transcripts the prediction makes anyway), chosen before anything is measured:
    where a real run is expected to write the predicted text longest. With the seconds it took (every prompt's
    transcript: counted as the prediction's)."""
    started = time.monotonic()
    task_set = load_task_set()
    ties = first_ties(
        target, task_set, types, n_predict=args.n_predict, max_k=max(s.k for s in settings), below=FLIPS_BELOW
    )
    chosen = []
    for t in types:
        latest = sorted(task_set.by_type(t), key=lambda x: -(ties[(t, x.id)] if ties[(t, x.id)] is not None else 1e9))
        chosen += latest[: args.prompts]
        shown = ", ".join(f"{x.id} {'none' if ties[(t, x.id)] is None else ties[(t, x.id)]}" for x in latest)
        print(f"{t}: first margin under {FLIPS_BELOW} logits (token) per prompt, latest first: {shown}")
    return type(task_set)(task_set.name, task_set.description, tuple(chosen)), time.monotonic() - started


def compare(
    label: str,
    target: Path,
    draft: Path,
    settings: list[Setting],
    types: list[str],
    args,
    chosen: tuple[TaskSet, float] | None = None,
) -> dict:
    # chosen (--untied): the prompts and what choosing them took, counted with the prediction (their transcripts)
    tasks, chose_s = chosen or (trimmed_tasks(load_task_set(), types, args.prompts), 0.0)
    print(f"\n## {label}: target {target.name}, draft {draft.name}, {len(settings)} settings, types {types}\n")
    started = time.monotonic()
    prun = predict(
        target,
        draft,
        settings,
        tasks,
        types,
        n_predict=args.n_predict,
        log=lambda s: None,
        temperature=args.temperature,
    )
    predict_s = time.monotonic() - started + chose_s
    if args.temperature == 0:
        exact_check(target, draft, settings, tasks, types, args, prun)
    config = SweepConfig(
        str(target),
        str(draft),
        tasks,
        content_types=tuple(types),
        extend=False,
        prompts_per_type=args.prompts,
        n_predict=args.n_predict,
        repeats=args.repeats,
        settings=tuple(settings),
        temperatures=(args.temperature,),
    )
    started = time.monotonic()
    result = run_sweep(config)
    measure_s = time.monotonic() - started
    predicted: dict[tuple[str, str], Prediction] = {(p.content_type, p.setting): p for p in prun.predictions}
    print(HEADER)
    rows = []
    for c in result.cells:
        p = predicted.get((c.cell.content_type, c.cell.setting.label))
        if p is None:
            continue
        err = None if not c.speedup or p.speedup is None else 100 * (p.speedup - c.speedup) / c.speedup
        at = c.earliest_difference  # every prompt's: one prompt parting early makes the cell another text
        # Texts that part late timed nearly the same text; the comparison keeps out those that part early: before
        # about half the answer (two characters a token, of the four a token holds on average).
        late = at is not None and at >= 2 * args.n_predict
        same = c.identical is not False or late or args.temperature > 0  # sampled texts part by nature
        rows.append((c, p, err, same))
        text = "yes" if c.identical is not False else f"late@{at}" if late else f"no@{at}"
        rng = measured_range(c)
        shown = "-" if rng is None else f"{rng[0]:.2f}-{rng[1]:.2f}x"
        print(
            f"| {c.cell.content_type} | {c.cell.setting.label} | {pct(p.acceptance)} | {pct(c.acceptance_rate)} | "
            f"{times(p.speedup)} | {times(c.speedup)} | {shown} | {'-' if err is None else f'{err:+.0f}%'} | {text} |"
        )
    agree = [(c, p, e) for c, p, e, same in rows if same]
    sides(agree)
    acc = [abs(100 * (p.acceptance - c.acceptance_rate)) for c, p, _ in agree
           if p.acceptance is not None and c.acceptance_rate is not None]  # fmt: skip
    spd = [abs(e) for _, _, e in agree if e is not None]
    print()
    if acc:
        print(f"acceptance error over {len(acc)} agreeing settings: mean {mean(acc):.1f} points, worst {max(acc):.1f}")
    if spd:
        print(f"speedup error over {len(spd)} agreeing settings: mean {mean(spd):.1f}%, worst {max(spd):.1f}%")
    print(f"settings whose texts parted early (left out of the errors): {sum(not r[3] for r in rows)} of {len(rows)}")
    # An error smaller than the measurement's own spread cannot be told from noise; one beyond it is the model's.
    beyond = []
    for c, p, _e in agree:
        rng = measured_range(c)
        if rng is not None and p.speedup is not None and not rng[0] <= p.speedup <= rng[1]:
            edge = rng[0] if p.speedup < rng[0] else rng[1]
            beyond.append(100 * (p.speedup - edge) / edge)
    print(
        f"predictions outside the measured range: {len(beyond)} of {len(agree)}"
        + (f", by {min(beyond):+.0f}% to {max(beyond):+.0f}% of its nearer end" if beyond else "")
    )
    # The same predictions under each residual model, from their own counts: what step_extra added taken out, then
    # each model's price of the same rounds, calls and drafted tokens (the floor of step_seconds left out).
    models = residual_models(prun.costs["target"])
    errors: dict[str, list[float]] = {name: [] for name in models}
    for c, p, _e in agree:
        if not c.speedup or not p.calls:
            continue
        base = p.spec_seconds - p.extra_seconds
        for name, price in models.items():
            errors[name].append(abs(100 * (p.plain_seconds / (base + price(p)) - c.speedup) / c.speedup))
    per_call = prun.costs["target"].extra_per_call_s
    shown_round = "not measured" if per_call is None else f"{per_round(per_call) * 1000:+.2f} ms"
    share = prun.costs["target"].residual_share
    if per_call is not None and share is not None:
        priced = "priced" if prun.costs["target"].residual_used else "not priced: within the parts' own movement"
        shown_round += f" ({share:+.0%} of the timed rounds' parts, {priced})"
    line = prun.costs["target"].residual_fit
    if line is not None:  # SPECREG_RESIDUAL_FIT=1: timed at two K, and every residual model compared
        at = ", ".join(f"{r * 1000:+.2f} ms at K {k}" for k, r in prun.costs["target"].residual_points)
        shown_round = f"{at}; fitted over K {ROUND_K} and {FIT_K}: {Fit(*line).describe()}"
    disturbed = [n for n, c in prun.costs.items() if c.disturbed]
    if disturbed:
        print(f"warning: cost records measured while the machine was busy: {', '.join(disturbed)}")
    if any(errors.values()):
        print(f"per round beyond the parts: {shown_round}; the same predictions' speedup error by residual model:")
        for name, errs in errors.items():
            if errs:
                print(f"  {name}: mean {mean(errs):.1f}%, worst {max(errs):.1f}%")
    # The same predictions with every decode call priced at the cost model's timed depth, as before each task was
    # priced at its own context (Prediction.spec_context_s, plain_context_s)
    flat = [
        abs(100 * ((p.plain_seconds - p.plain_context_s) / (p.spec_seconds - p.spec_context_s) - c.speedup) / c.speedup)
        for c, p, _e in agree
        if c.speedup and p.spec_seconds - p.spec_context_s > 0
    ]
    if flat:
        t_cost = prun.costs["target"]
        step = f"{t_cost.per_cell * 256 * 1000:.2f} ms per 256 cells" if t_cost.seconds_lo is not None else "not timed"
        print(
            f"context: the target's step {step}; speed-up error priced at the timed depth instead: "
            f"mean {mean(flat):.1f}%, worst {max(flat):.1f}%"
        )
    every = [abs(e) for _, _, e, _ in rows if e is not None]
    if every and len(every) > len(spd):
        print(f"speedup error over all {len(every)} settings: mean {mean(every):.1f}%, worst {max(every):.1f}%")
    for t in types:
        cells = [r for r in rows if r[0].cell.content_type == t and r[0].speedup]
        if not cells:
            continue
        best_m = max(cells, key=lambda r: r[0].speedup or 0)
        best_p = max(cells, key=lambda r: r[1].speedup or 0)
        gap = 1 - (best_p[0].speedup or 0) / (best_m[0].speedup or 1)
        ok = best_p is best_m or gap <= max(0.05, spread(best_m[0]))
        print(
            f"{t}: predicted best {best_p[0].cell.setting.label} measured {times(best_p[0].speedup)}; measured best "
            f"{best_m[0].cell.setting.label} {times(best_m[0].speedup)} ({gap:.0%} apart: {'ok' if ok else 'MISSED'})"
        )
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in prun.seconds.items())
    if chose_s:
        parts += f", choosing the prompts {chose_s:.1f} s"
    after = prun.seconds["replay"] + prun.seconds["forced"]  # the cost model too is kept per model and build
    print(
        f"prediction {predict_s:.1f} s ({parts}); measurement {measure_s:.1f} s: "
        f"{measure_s / max(predict_s, 1e-9):.1f}x faster from nothing, "
        f"{measure_s / max(after, 1e-9):.1f}x once the transcript exists"
    )
    table = [
        (
            c.cell.content_type,
            c.cell.setting.label,
            p.acceptance,
            c.acceptance_rate,
            p.speedup,
            c.speedup,
            measured_range(c),
        )
        for c, p, _e, _same in rows
    ]
    return {
        "acc": acc,
        "spd": spd,
        "models": errors,
        "rows": table,
        "changed": prun.changed_tokens,
        "predict_s": predict_s,
        "measure_s": measure_s,
        "beyond": beyond,
        "n": len(agree),
    }


def sides(agree: list[tuple[CellResult, Prediction, float | None]]) -> None:
    """Where a speed-up error sits: the predicted plain and speculative rates (tokens over the predicted seconds)
    against the measured medians of the same setting's interleaved runs. A bias on the plain side is the target's
    batch of one; on the speculative side, a round's parts or its residual."""
    plain, spec = [], []
    for c, p, _e in agree:
        if c.plain is None or c.spec is None or not p.plain_seconds or not p.spec_seconds:
            continue
        plain.append(100 * (p.tokens / p.plain_seconds - c.plain.median) / c.plain.median)
        spec.append(100 * (p.tokens / p.spec_seconds - c.spec.median) / c.spec.median)
        print(
            f"  rates, {c.cell.content_type} {c.cell.setting.label}: plain {p.tokens / p.plain_seconds:.1f} predicted, "
            f"{c.plain.median:.1f} measured ({c.plain.min:.1f}-{c.plain.max:.1f}) t/s; speculative "
            f"{p.tokens / p.spec_seconds:.1f} predicted, {c.spec.median:.1f} measured ({c.spec.min:.1f}-{c.spec.max:.1f})"
        )
    if plain:
        print(
            f"rate error, signed mean: plain {mean(plain):+.1f}% ({min(plain):+.0f}% to {max(plain):+.0f}%), "
            f"speculative {mean(spec):+.1f}% ({min(spec):+.0f}% to {max(spec):+.0f}%)"
        )


def exact_check(target: Path, draft: Path, settings: list[Setting], tasks, types: list[str], args, prun) -> None:
    """The forced pass (runner.predict.forced) against the exact replay of every draft-model setting: how often the
    drafted or accepted counts differ, and what each path took."""
    if not any(s.method == "draft-simple" for s in settings):
        return
    started = time.monotonic()
    exact = predict(target, draft, settings, tasks, types, n_predict=args.n_predict, exact=True)
    took = time.monotonic() - started
    fast = {(p.content_type, p.setting): (p.drafted, p.accepted) for p in prun.predictions}
    rows = [(p, fast[(p.content_type, p.setting)]) for p in exact.predictions if p.method == "draft-simple"]
    differ = [(p, f) for p, f in rows if f != (p.drafted, p.accepted)]
    print(
        f"forced pass against exact replay: {len(differ)} of {len(rows)} settings differ; forced pass "
        f"{prun.seconds['forced']:.1f} s, exact replays {exact.seconds['replay']:.1f} s (of {took:.1f} s)"
    )
    for p, f in differ:
        print(f"  {p.content_type} {p.setting}: forced {f[0]}/{f[1]}, exact {p.drafted}/{p.accepted} drafted/accepted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="code,prose")
    parser.add_argument("--n-predict", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=2, help="prompts per content type")
    parser.add_argument("--quick", action="store_true", help="SmolLM2, two settings, one code prompt, 24 tokens")
    parser.add_argument("--part", choices=("all", "draft", "draftless"), default="all", help="which comparisons to run")
    parser.add_argument(
        "--ngram-target",
        choices=("smollm2", "qwen15"),
        default="smollm2",
        help="the draftless methods' target (SmolLM2's texts part early under n-gram drafting on this build)",
    )
    parser.add_argument(
        "--untied",
        action="store_true",
        help="per content type, the prompts whose target answer reaches a near-tie latest (of all the type's)",
    )
    parser.add_argument(
        "--temperature", type=float, default=0.0, help="above 0: the draft model's expected acceptance only"
    )
    args = parser.parse_args()
    hw = hardware.detect()
    build = llamacpp.build_info()
    print(f"hardware: {hw['hardware_class']} ({hw['cpu_model']}); llama.cpp {build.label} built for {build.isa or '?'}")
    print(
        f"{args.n_predict} tokens, {args.repeats} repeat(s), {args.prompts} prompt(s) per type, "
        f"temperature {args.temperature:g}"
    )
    smol = model_path("smollm2")
    runs = []
    if args.quick:
        args.types, args.n_predict, args.repeats, args.prompts = "code", 24, 1, 1
        settings = [Setting("draft-simple", 2, 0.0), Setting("ngram-mod", 16, None)]
        runs.append(compare("quick", smol, smol, settings, ["code"], args))
    else:
        types = args.types.split(",")
        drafts = [Setting("draft-simple", k, p) for p in (0.0, 0.75) for k in (2, 4, 8)]
        ngram = [
            Setting("ngram-mod", 16, None, (("--spec-ngram-mod-n-match", "24"),)),
            Setting("ngram-map-k", 8, None, (("--spec-ngram-map-k-size-n", "12"),)),
            Setting("ngram-simple", 8, None, (("--spec-ngram-simple-size-n", "12"),)),
        ]
        # The draftless methods first: on the draft pair's target (--ngram-target qwen15) their cost model, timed up to
        # a batch of 17, then serves the pair's up to 9, as it would a user predicting both (measure_cost)
        if args.temperature == 0 and args.part in ("all", "draftless"):  # n-gram methods: temperature 0 only
            # edits repeat their input: where n-gram methods find drafts (code and prose give them little)
            target = model_path(args.ngram_target)
            ntypes = sorted({*types, "edit"})
            chosen = untied_tasks(target, ngram, ntypes, args) if args.untied else None
            runs.append(compare("draftless", target, target, ngram, ntypes, args, chosen))
        if args.part in ("all", "draft"):
            target = model_path("qwen15")
            chosen = untied_tasks(target, drafts, types, args) if args.untied else None
            runs.append(compare("draft model", target, model_path("qwen05"), drafts, types, args, chosen))
    acc = [x for r in runs for x in r["acc"]]
    spd = [x for r in runs for x in r["spd"]]
    print("\n## All")
    if acc:
        print(f"acceptance error: mean {mean(acc):.1f} points (target 3), worst {max(acc):.1f} (target 5)")
    if spd:
        print(f"speedup error: mean {mean(spd):.1f}% (target 10%), worst {max(spd):.1f}% (target 15%)")
    for name in {name: None for r in runs for name in r["models"]}:
        errs = [x for r in runs for x in r["models"].get(name, [])]  # the draft-model pair's own: one run holds them
        if errs:
            print(f"speedup error, draft models, residual {name}: mean {mean(errs):.1f}%, worst {max(errs):.1f}%")
    beyond = [x for r in runs for x in r["beyond"]]
    print(
        f"predictions outside the measured range: {len(beyond)} of {sum(r['n'] for r in runs)}"
        + (f" (by {min(beyond):+.0f}% to {max(beyond):+.0f}%)" if beyond else "")
    )
    p, m = sum(r["predict_s"] for r in runs), sum(r["measure_s"] for r in runs)
    print(f"prediction {p:.0f} s against measurement {m:.0f} s ({m / max(p, 1e-9):.1f}x)")


if __name__ == "__main__":
    procs.stop_on_termination()  # a terminated run leaves no llama-server behind
    main()
