"""import_speed_bench FILE --target T [--draft D] --method M --hardware H --build B: SPEED-Bench figures as reported
results."""

from __future__ import annotations

from inspector.management.base import SpecregCommand, UserError
from inspector.speculative import SPEC_TYPES
from registry.hub.speed_bench import SpeedBenchError, import_file, k_of, pair_of, read, resolve


class Command(SpecregCommand):
    help = (
        "Import the JSON that llama.cpp's SPEED-Bench client writes (speed_bench.py --output) as reported "
        "results of a pair: measured elsewhere, kept apart from specreg's own measurements."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="speed_bench.py's --output file")
        parser.add_argument("--target", required=True, help="the served model: a registered file id, a path or hf://…")
        parser.add_argument(
            "--draft", help="the draft model (id, path or hf://…); leave out for n-gram methods or MTP heads"
        )
        parser.add_argument(
            "--method",
            required=True,
            choices=SPEC_TYPES,
            metavar="M",
            help="llama.cpp's --spec-type the server ran (draft-simple, ngram-mod, draft-mtp, …)",
        )
        parser.add_argument("--hardware", required=True, help="where it ran, e.g. 'RTX 4090' or 'cpu-16c'")
        parser.add_argument("--build", required=True, help="the llama.cpp build of the server, e.g. b11434")
        parser.add_argument(
            "--k",
            type=int,
            help="draft tokens per step (--spec-draft-n-max); default: the file's "
            "speculative.n_max, if its requests set one",
        )
        parser.add_argument(
            "--baseline",
            help="a SPEED-Bench output of the same server without speculation: gives each category's speed-up",
        )
        parser.add_argument("--source-url", default="", help="where the run is published (CI job, report), if anywhere")

    def handle(self, *args, **o) -> None:
        if o["k"] is not None and not 0 <= o["k"] <= 1024:
            raise UserError(f"--k {o['k']}: expected 0 to 1024")
        if not o["build"].strip() or not o["hardware"].strip():
            raise UserError("--build and --hardware say where the figures come from: they cannot be empty")
        try:
            sb = read(o["file"])
            baseline = read(o["baseline"]) if o["baseline"] else None
            k = k_of(sb, o["k"])
            target = resolve(o["target"])
            draft = resolve(o["draft"]) if o["draft"] else None
            pair = pair_of(target, draft)
            done = import_file(
                sb,
                pair,
                method=o["method"],
                hardware=o["hardware"].strip()[:200],
                build=o["build"].strip()[:32],
                k=k,
                baseline=baseline,
                source_url=o["source_url"].strip(),
            )
        except SpeedBenchError as exc:
            raise UserError(str(exc)) from None
        what = f"{draft.source} drafting for {target.source}" if draft else f"{target.source} alone"
        self.stdout.write(f"pair {pair.pk} ({what}, {o['method']}, K={k}): {len(done.added)} reported result(s) added")
        for r in done.added:
            speed = f", speed-up {r.speedup:.2f}x" if r.speedup else ""
            acc = "" if r.acceptance is None else f", acceptance {r.acceptance:.1%}"
            self.stdout.write(f"  {r.content_type}: {r.tokens_per_second:.2f} tokens/s{acc}{speed}")
        for why in done.skipped:
            self.stdout.write(f"  skipped {why}")
