"""soak PAIR_OR_DEPLOYMENT: the recommended llama-server setting under a loop of task-set requests for a while,
queued on the hardware's benchmark queue (it occupies that worker), or run here; prints its verdict."""

from __future__ import annotations

from inspector.management.base import UserError
from registry.models import BenchmarkRun, StabilityResult
from runner.errors import BenchmarkError
from runner.management.commands.run_benchmark import Command as RunBenchmark
from runner.runs.submit import queue_soak
from runner.soak.loop import duration_text
from runner.soak.targets import DEFAULT_INTERVAL_S, parse_duration


class Command(RunBenchmark):
    help = (
        "Soak a pair's best measured setting (12 or pair:12) or a team deployment's (deployment:3): llama-server "
        "with those flags under a loop of the task set's requests, recorded every interval (throughput, acceptance, "
        "resident memory, errors, time-outs; at one client, outputs against plain ones). Stops early when the "
        "server crashes, stops answering, grows past the memory bound or fails too many requests."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("ref", metavar="PAIR_OR_DEPLOYMENT", help="12, pair:12 or deployment:3")
        parser.add_argument("--duration", default="1h", help="how long: 90s, 30m, 1h (default 1h; at most 24h)")
        parser.add_argument("--clients", type=int, default=1, help="concurrent clients (default 1)")
        parser.add_argument(
            "--interval", default=f"{DEFAULT_INTERVAL_S}s", help="one record per interval (default 60s, at least 5s)"
        )
        parser.add_argument("--request-timeout", type=float, help="seconds one request may take (default 300)")
        parser.add_argument("--method", help="soak this --spec-type instead of the recommended setting")
        parser.add_argument("--k", type=int, help="with --method: its draft length (default 8)")
        parser.add_argument("--n-predict", type=int, help="tokens per request (default 128)")
        parser.add_argument("--hardware", help="queue for another hardware class, e.g. gpu-nvidia-h100")
        parser.add_argument("--wait", action="store_true", help="follow the soak until it ends")
        parser.add_argument("--here", action="store_true", help="run the soak in this process (no worker needed)")
        parser.add_argument(
            "--timeout", type=float, default=0, help="with --wait: give up waiting after N seconds (default 0: never)"
        )

    def handle(self, *args, **o) -> None:
        try:
            run = queue_soak(
                o["ref"],
                duration_s=parse_duration(o["duration"]),
                clients=o["clients"],
                interval_s=parse_duration(o["interval"]),
                request_timeout_s=o["request_timeout"],
                method=o["method"],
                k=o["k"],
                n_predict=o["n_predict"],
                hardware=o["hardware"],
                send=not o["here"],
            )
        except BenchmarkError as exc:
            raise UserError(str(exc)) from None
        soak = run.params["soak"]
        what = (
            f"{soak['method']} K={soak['k']} on pair {run.pair_id} ({soak['basis']}), {soak['clients']} client(s), "
            f"{duration_text(soak['duration_s'])}"
        )
        if o["here"]:
            self.stdout.write(f"soaking here as run {run.pk}: {what}")
            self._run_here(run.pk)
        else:
            self.stdout.write(f"queued soak run {run.pk} on {run.queue} (it occupies that worker): {what}")
            if o["wait"]:
                self._follow(run.pk, o["timeout"])
        self._finish(run.pk)

    def _finish(self, run_id: int) -> None:
        run = BenchmarkRun.objects.get(pk=run_id)
        if not run.finished:
            return
        row = StabilityResult.objects.filter(run=run).first()
        if row is not None:
            self.stdout.write(f"soak {row.status}: {row.verdict}")
            for iv in row.intervals:
                acc = f"{iv['acceptance']:.0%}" if iv.get("acceptance") is not None else "-"
                rss = f"{iv['rss_mb']:.0f} MiB" if iv.get("rss_mb") is not None else "-"
                self.stdout.write(
                    f"  {iv['t']:>7.0f} s  {iv['requests']:>4} requests  {iv['tokens_per_second']:>7.1f} t/s  "
                    f"accept {acc:>4}  {rss:>9}  errors {iv['errors']}  time-outs {iv['timeouts']}"
                )
        if run.status == BenchmarkRun.FAILED:
            raise UserError(f"soak run {run_id} failed: {run.error}")
        if row is not None and row.status not in (StabilityResult.STABLE,):
            raise UserError(f"soak run {run_id}: {row.verdict}")
