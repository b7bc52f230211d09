"""run_benchmark TARGET [DRAFT]: queue (and optionally wait for) a real llama.cpp benchmark of a target's
speculation methods (with a draft model, or draftless), or run it here."""

from __future__ import annotations

import json
import signal
import time

from django.conf import settings

from inspector.management.base import SpecregCommand, UserError, float_list, int_list
from inspector.spec_flags import OWN_HEADS, Setting
from registry.catalog.pairing import pair_for
from registry.formatting import duration
from registry.hub.sources import SourceRegistrationError, register_source
from registry.models import BenchmarkRun
from runner.errors import BenchmarkError
from runner.llama import procs
from runner.methods import default_methods, nothing_drafted, offered_method
from runner.models import workers_on
from runner.predict.runs import acceptance_apart, drafted_apart, predictions_by_setting
from runner.runs import records, submit
from runner.runs.execute import execute
from runner.runs.params import DEFAULT_PARAMS


class Command(SpecregCommand):
    help = (
        "Benchmark TARGET's speculation methods with real llama.cpp, queued to a Celery worker: with DRAFT, "
        "the draft's method and the n-gram family; without, the n-gram family (and the target's own MTP "
        "heads). Sources are local paths or hf:// files (registered automatically). With --wait, follow "
        "progress and print the results."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("target", nargs="?")
        parser.add_argument("draft", nargs="?")
        parser.add_argument(
            "--methods",
            help="llama.cpp --spec-type values to compare, e.g. ngram-mod,ngram-map-k "
            "(default: the draft's method and the n-gram family; no DRAFT: the n-gram family)",
        )
        parser.add_argument(
            "--k",
            type=int_list,
            help="draft-model K values to sweep, e.g. 4,8,16 (default; extended "
            "while faster); n-gram methods sweep their own draft length",
        )
        parser.add_argument("--p-min", type=float_list, help="draft-model and MTP p-min values, e.g. 0,0.75 (default)")
        parser.add_argument("--no-extend", action="store_true", help="measure exactly --k, no extension upward")
        parser.add_argument(
            "--full-sweep",
            action="store_true",
            help="measure every setting; by default every setting is predicted first (temperature 0: the target's "
            "transcript replayed through llama.cpp's speculative loop, a cost model of this machine) and only the best "
            "two per content type are measured (plus any method that cannot be predicted)",
        )
        parser.add_argument("--tasks", help="content types, e.g. code,prose (default: all in the task set)")
        parser.add_argument("--task-file", help="a JSON task set of your own")
        parser.add_argument("--temperatures", type=float_list, help="e.g. 0,0.7 (default 0)")
        # None here: runner.runs.params fills the run's defaults, which the help names
        parser.add_argument(
            "--repeats",
            type=int,
            help=f"interleaved plain/speculative pairs per prompt (default {DEFAULT_PARAMS['repeats']})",
        )
        parser.add_argument(
            "--n-predict", type=int, help=f"tokens generated per run (default {DEFAULT_PARAMS['n_predict']})"
        )
        parser.add_argument(
            "--prompts-per-type",
            type=int,
            help=f"prompts of each content type (default {DEFAULT_PARAMS['prompts_per_type']})",
        )
        parser.add_argument(
            "--via",
            choices=("cli", "server"),
            help="measure with llama.cpp's command-line tools "
            "(cli, default) or through llama-server started with the deployed flags (server)",
        )
        parser.add_argument(
            "--clients",
            type=int_list,
            help="with --via server: concurrent clients, e.g. 1,2,4 (default 1); every setting is swept at the "
            "smallest, the best two per content type are measured again at each larger one",
        )
        parser.add_argument(
            "--parallel", type=int, help="with --via server: the servers' slots (-np; default: as many as clients)"
        )
        parser.add_argument(
            "--hardware", help="queue for another hardware class, e.g. gpu-nvidia-h100 (default: this machine's class)"
        )
        parser.add_argument(
            "--wait",
            action="store_true",
            help="follow the run until it finishes (a worker must consume its queue; exits 2 at once when none does)",
        )
        parser.add_argument(
            "--here",
            action="store_true",
            help="run the benchmark in this process (no worker needed), printing the same results as --wait",
        )
        parser.add_argument(
            "--timeout", type=float, default=0, help="with --wait: give up waiting after N seconds (default 0: never)"
        )
        parser.add_argument("--cancel", type=int, metavar="RUN_ID", help="cancel a queued or running run instead")

    def handle(self, *args, **o) -> None:
        if o["cancel"] is not None:
            try:
                self.stdout.write(f"run {o['cancel']}: {records.cancel(o['cancel'])}")
            except BenchmarkError as exc:
                raise UserError(str(exc)) from None
            return
        if not o["target"]:
            raise UserError("give TARGET [DRAFT] (or --cancel RUN_ID)")
        task_set = None
        if o["task_file"]:
            try:
                with open(o["task_file"]) as f:
                    task_set = json.load(f)
            except (OSError, ValueError) as exc:
                raise UserError(f"{o['task_file']}: {exc}") from None
        params = {
            "ks": o["k"],
            "content_types": o["tasks"].split(",") if o["tasks"] else None,
            "temperatures": o["temperatures"],
            "repeats": o["repeats"],
            "n_predict": o["n_predict"],
            "prompts_per_type": o["prompts_per_type"],
            "task_set": task_set,
            "extend": False if o["no_extend"] else None,
            "p_mins": o["p_min"],
            "via": o["via"],
            "full_sweep": True if o["full_sweep"] else None,
            "clients": o["clients"],
            "parallel": o["parallel"],
        }
        try:
            target = register_source(o["target"]).file
            draft = register_source(o["draft"]).file if o["draft"] else None
            params["methods"] = (
                o["methods"].split(",")
                if o["methods"]
                else default_methods(offered_method(draft), offered_method(target) == OWN_HEADS)
            )
            # Without a draft the run is recorded on the target's own pair (its table row shows the method).
            pair = pair_for(target, draft or target)
            run = submit.queue_benchmark(
                pair,
                params,
                hardware=o["hardware"],
                send=not o["here"],
                target_alone=draft is None,
                files=(target, draft or target),  # these quants, whichever the pair was checked on
            )
        except (SourceRegistrationError, BenchmarkError) as exc:
            raise UserError(str(exc)) from None
        what = (
            f"{draft.source} drafting for {target.source}" if draft else f"{target.source} alone"
        ) + f" ({', '.join(run.params['methods'])})"
        if o["here"]:
            self.stdout.write(f"running run {run.pk} here: {what}")
            self._run_here(run.pk)
        else:
            self.stdout.write(f"queued run {run.pk} on {run.queue}: {what}")
            if o["wait"]:
                self._follow(run.pk, o["timeout"])
        self._finish(run.pk)

    def _run_here(self, run_id: int) -> None:
        """The task's own code path (``execute``) in this process; Ctrl-C or SIGTERM cancels the run."""

        def stop(signum, frame) -> None:
            procs.stop_all()

        old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            execute(run_id, echo=self.stderr.write)  # each step as it starts and ends, as --wait follows a worker's
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _follow(self, run_id: int, timeout: float) -> None:
        start, last = time.monotonic(), None
        while True:
            run = BenchmarkRun.objects.get(pk=run_id)
            line = f"{run.status} {run.progress * 100:5.1f}% {run.progress_message}"
            if line != last:
                self.stderr.write(line)
                last = line
            if run.finished:
                return
            waited = time.monotonic() - start
            if (
                run.status == BenchmarkRun.QUEUED
                and waited > settings.SPECREG_NO_WORKER_AFTER_SECONDS
                and not workers_on(run.queue)
            ):
                raise UserError(
                    f"no worker is listening on queue {run.queue}; run {run_id} stays queued for a later worker. "
                    f"Start one with: celery -A runner worker -Q {run.queue} --pool solo "
                    f"(on a machine of hardware class {run.hardware_class}), or run it here with --here"
                )
            if timeout and waited > timeout:
                raise UserError(f"run {run_id} still {run.status} after {timeout:.0f} s (it goes on; see its page)")
            time.sleep(1)

    def _finish(self, run_id: int) -> None:
        run = BenchmarkRun.objects.get(pk=run_id)
        if not run.finished:
            return  # queued without --wait
        self.stdout.write(format_results(run))
        if run.status != BenchmarkRun.DONE:
            raise UserError(f"run {run_id} {run.status}: {run.error}")


def _predicted(predicted: dict, r) -> str:
    """The predicted speedup of a measured setting and the measurement's error against it."""
    x = predicted.get((r.content_type, r.setting_label))
    if x is None or x.speedup is None or r.temperature != 0:
        return "-"
    if r.speedup is None:
        return f"{x.speedup:.2f}x"
    return f"{x.speedup:.2f}x ({100 * (x.speedup - r.speedup) / r.speedup:+.0f}%)"


def format_results(run: BenchmarkRun) -> str:
    via = " through llama-server" if run.params.get("via") == "server" else ""
    lines = [
        f"run {run.pk}: {run.status} on {run.hardware.get('cpu_model', '?')} with llama.cpp "
        f"{run.build.get('label', '?')}{via}",
        f"{'type':<8} {'temp':>4} {'setting':<44} {'plain t/s':>9} {'spec t/s':>9} {'speedup':>7} {'accept':>7} "
        f"{'predicted':>16} identical",
    ]
    predicted = predictions_by_setting(run)
    for r in run.results.order_by("pk"):
        spd = f"{r.speedup:.2f}x" if r.speedup is not None else "n/a"
        acc = f"{r.acceptance * 100:.1f}%" if r.acceptance is not None else "n/a"
        ident = {
            True: "yes",
            False: f"no (from char {r.divergences[0]['position']})" if r.divergences else "no",
            None: "-",
        }[r.identical]
        label = r.setting_label
        if r.clients > 1:  # under load: aggregate speeds; outputs compared with the single-client plain output
            label += f" ×{r.clients} clients"
            ident = f"{r.differing_share:.0%} differ (info)" if r.differing_share is not None else "-"
        spec = f"{r.tokens_per_second or 0:.1f}"
        if not r.speculation_ran:
            # nothing drafted: the speculative process decoded the target alone, so one speed and no speed-up
            spd = spec = acc = "-"
            ident = f"{nothing_drafted(r.method, r.p_min)} (plain t/s: the target's own speed)"
            if r.status != "ok":
                ident = f"{r.status}: {r.error}" if r.error else r.status
        lines.append(
            f"{r.content_type:<8} {r.temperature:>4.1f} {label:<44} "
            f"{r.baseline_tokens_per_second or 0:>9.1f} "
            f"{spec:>9} {spd:>7} {acc:>7} {_predicted(predicted, r):>16} {ident}"
        )
        guess = predicted.get((r.content_type, r.setting_label)) if r.temperature == 0 else None
        if guess is not None and (why := drafted_apart(r, guess)):
            lines.append(f"  predicted {guess.drafted} drafted, measured {r.drafted}: {why}")
        elif guess is not None and (why := acceptance_apart(r, guess)):
            lines.append(f"  {why}")
    pred = run.summary.get("prediction")
    if pred:
        took = sum(pred["seconds"].values())
        saved = pred.get("saved_s")
        lines.append(
            f"predicted {pred['settings']} setting(s) first in {took:.0f} s and measured the best"
            + (f": about {duration(saved)} of benchmark spared" if saved and saved > 0 else "")
            + " (--full-sweep measures every setting)"
        )
    for rec in run.summary.get("recommendations", []):
        what = "run without speculation"
        if rec["k"]:
            s = Setting(
                rec.get("method") or "draft-simple",
                rec["k"],
                rec.get("p_min"),
                tuple(tuple(o) for o in rec.get("options") or ()),
            )
            what = f"{s.label} ({rec['speedup']:.2f}x)"
        lines.append(
            f"recommended for {rec['content_type']} at temperature {rec['temperature']}: {what}"
            # why, in the run's own words: "no measurable gain: … within its spread …; more repeats would tell"
            + (f" because {rec['reason']}" if rec.get("reason") else "")
            + (f" (caveat: {rec['caveat']})" if rec.get("caveat") else "")
        )
    if run.server_command:
        lines.append(f"llama-server: {run.server_command}")
    return "\n".join(lines)
