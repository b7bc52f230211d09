"""deployment add|list|scrape|retire: record what runs in production and read its telemetry."""

from __future__ import annotations

import getpass

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand, UserError
from inspector.speculative import SPEC_TYPES
from registry.team import deployments as deps
from registry.team.models import Deployment
from registry.team.telemetry import ScrapeError, TelemetrySample, observed, scrape, scrape_active


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (containers): still record something
        return "unknown"


def _k(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 1024:
        raise UserError(f"--k {value!r}: expected a whole number from 1 to 1024")
    return int(value)


class Command(SpecregCommand):
    help = "Record, list, scrape and retire deployments (what runs in production)."

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="add|list|scrape|retire")
        # Subparsers inherit none of our one-line error handling: route their errors to the parent's.
        add = sub.add_parser("add", help="record a deployment")
        add.add_argument("--target", required=True, help="registered file id, local path or hf://… (registered if new)")
        add.add_argument("--draft", default="", help="the draft, as for --target (none for draftless methods)")
        add.add_argument(
            "--method",
            required=True,
            choices=SPEC_TYPES,
            metavar="METHOD",
            help=f"--spec-type: {', '.join(SPEC_TYPES)}",
        )
        add.add_argument("--k", default=None, help="draft tokens per step")
        add.add_argument("--command", required=True, help="the exact llama-server command line")
        add.add_argument("--flags", default="", help="other settings worth noting")
        add.add_argument("--host", default="", help="where it runs")
        add.add_argument("--url", default="", help="http://HOST:PORT of the server (started with --metrics) to scrape")
        add.add_argument("--author", default="", help="who deployed it (default: this operating-system user)")
        lst = sub.add_parser("list", help="list deployments, active first")
        lst.add_argument("--all", action="store_true", help="retired ones too")
        sc = sub.add_parser("scrape", help="scrape /metrics once now: one deployment, or every active one with a URL")
        sc.add_argument("id", nargs="?", default=None)
        ret = sub.add_parser("retire", help="mark a deployment retired (it is kept, with its end date)")
        ret.add_argument("id")
        for p in (add, lst, sc, ret):
            p.error = lambda message: parser.error(message)  # looked up late: set after this

    def handle(self, *args, action: str, **opts) -> None:
        getattr(self, f"do_{action}")(**opts)

    def do_add(
        self,
        *,
        target: str,
        draft: str,
        method: str,
        k: str | None,
        command: str,
        flags: str,
        host: str,
        url: str,
        author: str,
        **_,
    ) -> None:
        try:
            spec = deps.DeploymentSpec(
                target=deps.resolve_file(target),
                draft=deps.resolve_file(draft) if draft.strip() else None,
                method=method,
                command=command,
                k=_k(k) if k is not None else None,
                flags=flags,
                host=host,
                url=url,
            )
            d = deps.record(spec, author_name=author.strip() or _os_user())
        except deps.DeploymentError as exc:
            raise UserError(str(exc)) from None
        self._say(f"deployment {d.pk}: {self._describe(d)}")

    def do_list(self, *, all: bool, **_) -> None:
        qs = deps.deployments_of()
        if not all:
            qs = qs.filter(retired_at__isnull=True)
        rows = list(qs[:1000])
        if not rows:
            self.stdout.write("no deployments" if all else "no active deployments (--all lists retired ones too)")
        for d in rows:
            o = observed(d)
            obs = (f"observed {o.acceptance:.1%} accepted" if o.acceptance is not None else "observed –") + (
                f", {o.tokens_per_second:.1f} t/s" if o.tokens_per_second is not None else ""
            )
            state = f"retired {d.retired_at:%Y-%m-%d}" if d.retired_at else "active"
            self._say(f"{d.pk:>5}  {state:<18} {self._describe(d)}  [{obs}; {o.samples} scrapes, {o.gaps} gaps]")

    def do_scrape(self, *, id: str | None, **_) -> None:
        if id is None:
            samples = scrape_active()
            if not samples:
                self.stdout.write("no active deployment has a URL to scrape")
        else:
            d = self._get(id)
            if not d.url:
                raise UserError(f"deployment {d.pk} has no URL to scrape (record one with --url)")
            try:
                samples = [scrape(d)]
            except ScrapeError as exc:
                raise UserError(str(exc)) from None
        for s in samples:
            self._say(self._sample_line(s))
        if id is not None and samples and not samples[0].ok:
            raise UserError(f"deployment {id}: scrape failed, recorded as a gap: {samples[0].error}")

    def do_retire(self, *, id: str, **_) -> None:
        d = self._get(id)
        try:
            deps.retire(d)
        except deps.DeploymentError as exc:
            raise UserError(str(exc)) from None
        self.stdout.write(f"deployment {d.pk} retired at {d.retired_at:%Y-%m-%d %H:%M:%S} UTC (kept on record)")

    def _say(self, line: str) -> None:
        # Host, author, URL, sources, command and scrape errors come from people and servers: a value
        # holding ESC or CR must not move the cursor or recolour the operator's terminal.
        self.stdout.write(terminal_safe(line))

    @staticmethod
    def _get(id: str) -> Deployment:
        if not id.isdigit():
            raise UserError(f"{id!r}: expected a deployment id (see: deployment list)")
        d = Deployment.objects.filter(pk=int(id)).select_related("target__model", "draft__model").first()
        if d is None:
            raise UserError(f"no deployment with id {id}")
        return d

    @staticmethod
    def _describe(d: Deployment) -> str:
        what = d.target.source + (f" + draft {d.draft.source}" if d.draft else "")
        setting = d.method + (f" K={d.k}" if d.k else "")
        where = f" on {d.host}" if d.host else ""
        return f"{what} ({setting}){where}, by {d.author_name}" + (f", scraped from {d.url}" if d.url else "")

    @staticmethod
    def _sample_line(s: TelemetrySample) -> str:
        head = f"deployment {s.deployment_id} at {s.scraped_at:%Y-%m-%d %H:%M:%S}:"
        if not s.ok:
            return f"{head} gap ({s.error})"
        totals = (
            f"totals drafted {s.draft_tokens_total or 0:.0f}, accepted {s.accepted_tokens_total or 0:.0f}, "
            f"generated {s.tokens_predicted_total or 0:.0f} in {s.tokens_predicted_seconds_total or 0:.2f} s"
        )
        if s.tokens_predicted is None:
            return f"{head} first sample stored ({totals}); traffic counts from the next scrape"
        acc = f"{s.acceptance:.1%}" if s.acceptance is not None else "–"
        tps = f"{s.tokens_per_second:.1f}" if s.tokens_per_second is not None else "–"
        reset = " after a server restart (counters reset; counted from zero)" if s.reset else ""
        return (
            f"{head} stored +{s.draft_tokens:.0f} drafted, +{s.accepted_tokens:.0f} accepted (acceptance {acc}), "
            f"+{s.tokens_predicted:.0f} generated ({tps} t/s){reset}; {totals}"
        )
