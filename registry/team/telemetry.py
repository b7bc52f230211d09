"""Production telemetry: scrape a deployment's llama-server ``/metrics``, store the traffic since the last scrape.

llama-server started with ``--metrics`` exports Prometheus counters (``server_task_result_metrics::
to_metrics`` in tools/server/server-task.cpp of the pinned build): the ones read here are named in
``COUNTERS``. Acceptance observed is accepted ÷ drafted tokens over the deltas; tokens per second is
generated tokens ÷ the seconds llama.cpp spent generating them (its own clock, per request, so it is
the speed one user sees, comparable with the runner's measured tokens/s).
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from urllib3.connection import HTTPConnection, HTTPSConnection

from registry.team.models import Deployment, TelemetrySample

# Sample field → the counter's full name in llama-server's /metrics (checked against the pinned
# source by tests/registry/test_team_telemetry.py).
COUNTERS = {
    "draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "llamacpp:spec_decode_num_accepted_tokens_total",
    "drafts": "llamacpp:spec_decode_num_drafts_total",
    "tokens_predicted": "llamacpp:tokens_predicted_total",
    "tokens_predicted_seconds": "llamacpp:tokens_predicted_seconds_total",
}
ERROR_CHARS = 500
# What everyone but staff sees of a failed scrape, whatever failed: one message for a refused port, a
# time-out and a service that is not llama-server, so adding deployments cannot map internal ports.
PUBLIC_GAP = "telemetry unavailable"
# After the deadline the watchdog shuts the scrape's socket; the reading thread ends within this.
WATCHDOG_GRACE_S = 1.0
# Deployments scraped at once by the beat's round: a round of slow servers takes about one deadline,
# not one deadline per server (the threads wait on sockets, not on the CPU).
SCRAPE_THREADS = 8
# A queued "scrape now" older than this is taken as lost (its worker died): another may be queued.
SCRAPE_PENDING_FOR = timedelta(minutes=5)
_HEADERS = {"Accept": "text/plain", "User-Agent": "specreg-telemetry"}

# Every reason a scrape is recorded with, as fetch() and parse_counters() write them: fixed words and
# numbers, never text the server sent (no body, reason phrase or certificate name). record() keeps
# only these, so neither an error stored here nor one imported from another installation's file can
# carry an internal service's answer.
_REASONS = re.compile(
    "|".join(
        [
            r"connection refused",
            r"timed out",
            r"no complete answer within \d+(?:\.\d+)? s",
            r"host name not found",
            r"could not connect",
            r"connection closed, or not an HTTP answer",
            r"TLS error: the certificate is for another host",
            r"TLS error: certificate not trusted",
            r"TLS error",
            r"HTTP \d{3}(?: \(was llama-server started with --metrics\?\))?",
            r"answer larger than [\d,]+ bytes",
            r"not Prometheus text",
            re.escape("no llamacpp:tokens_predicted_total counter: is this a llama-server /metrics?"),
            re.escape(PUBLIC_GAP),
        ]
    )
)


class ScrapeError(Exception):
    """The server could not be read, or did not answer with llama.cpp's metrics; one line."""


def reason_to_store(error: str) -> str:
    """The known reason in ``error`` (e.g. "connection refused" out of "http://h:1/metrics: connection refused"),
    or "scrape failed": what is stored is never more than the vocabulary above."""
    m = _REASONS.search(error or "")
    return m.group(0) if m else "scrape failed"


def may_see_reasons(user) -> bool:
    """Staff see why a scrape failed; everyone else sees PUBLIC_GAP (and when)."""
    return user is not None and user.is_authenticated and user.is_active and user.is_staff


def shown_error(error: str, *, staff: bool) -> str:
    return (error or "scrape failed") if staff else PUBLIC_GAP


def metrics_url(base: str) -> str:
    """``/metrics`` under a deployment's URL (a URL that already ends in /metrics is kept)."""
    base = base.rstrip("/")
    return base if base.endswith("/metrics") else base + "/metrics"


def validate_url(url: str) -> str:
    """An http(s) URL with a host; loopback and private addresses are allowed (staff enter these)."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ScrapeError(f"{url!r}: expected http://HOST:PORT or https://HOST:PORT")
    if parts.username or parts.password:
        raise ScrapeError("a deployment URL must not carry a user name or password")
    return url


class _Watch:
    """The sockets one scrape opened, so that the watchdog can shut them when its deadline passes.

    urllib3's read timeout is per read: a server sending its status line and headers a byte at a time
    (each within the timeout) would hold a scrape for as long as it likes; only shutting the socket
    ends the read that is waiting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.expired = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            if self.expired:  # connected just as the deadline passed
                _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    # shutdown wakes a recv() blocked in another thread (close() alone does not, on Linux).
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _watched_pool(url: str, watch: _Watch, timeout: float) -> urllib3.HTTPConnectionPool:
    """A pool of its own for one scrape (no retries, no redirects; certificates checked as urllib3 does by
    default) whose connections hand their raw socket to ``watch`` before any byte is read, TLS included."""

    def new_conn(base: type[HTTPConnection]):
        def _new_conn(self) -> socket.socket:
            sock = base._new_conn(self)
            watch.add(sock)
            return sock

        return _new_conn

    pool = urllib3.connection_from_url(
        url, retries=False, maxsize=1, headers=_HEADERS, timeout=urllib3.Timeout(connect=timeout, read=timeout)
    )
    base = HTTPSConnection if isinstance(pool, urllib3.HTTPSConnectionPool) else HTTPConnection
    pool.ConnectionCls = type("Watched" + base.__name__, (base,), {"_new_conn": new_conn(base)})
    return pool


def fetch(url: str, *, timeout: float | None = None, max_bytes: int | None = None) -> str:
    """GET ``url`` within ``timeout`` seconds overall and ``max_bytes``; anything else is a ScrapeError.

    The request runs in a thread of its own and this one waits at most ``timeout`` seconds for it: past
    the deadline the watchdog shuts its socket (ending a read however the server drips its status line,
    headers or body) and the scrape is a gap, even if a name lookup still hangs in that thread."""
    timeout = float(settings.SPECREG_TELEMETRY_TIMEOUT_SECONDS if timeout is None else timeout)
    max_bytes = settings.SPECREG_TELEMETRY_MAX_BYTES if max_bytes is None else max_bytes
    watch = _Watch()
    outcome: list[str | ScrapeError] = []
    worker = threading.Thread(
        target=_fetch_into, args=(url, timeout, max_bytes, watch, outcome), name="specreg-scrape", daemon=True
    )
    worker.start()
    worker.join(timeout)
    if worker.is_alive() or not outcome:
        watch.expire()
        worker.join(WATCHDOG_GRACE_S)
        raise ScrapeError(f"no complete answer within {timeout:g} s")
    if isinstance(outcome[0], ScrapeError):
        raise outcome[0]
    return outcome[0]


def _fetch_into(url: str, timeout: float, max_bytes: int, watch: _Watch, outcome: list) -> None:
    try:
        outcome.append(_fetch(url, timeout, max_bytes, watch))
    except ScrapeError as exc:
        outcome.append(exc)
    except Exception as exc:  # noqa: BLE001 - whatever broke, the scrape is a gap with a reason of our words
        outcome.append(ScrapeError(_reason(exc)))


def _fetch(url: str, timeout: float, max_bytes: int, watch: _Watch) -> str:
    deadline = time.monotonic() + timeout
    pool = _watched_pool(url, watch, timeout)
    try:
        try:
            r = pool.urlopen(
                "GET",
                urlsplit(url)._replace(scheme="", netloc="").geturl() or "/",
                preload_content=False,
                redirect=False,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ScrapeError(_reason(exc)) from None
        try:
            if r.status != 200:
                # The status only: a reason phrase is the server's text.
                raise ScrapeError(
                    f"HTTP {r.status}"
                    + (" (was llama-server started with --metrics?)" if r.status in (404, 501) else "")
                )
            chunks, size = [], 0
            # Read whatever has arrived (read1, not read(n), which waits for n bytes), so neither a huge
            # answer nor a slow trickle holds the beat past the deadline.
            while chunk := r.read1(64 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise ScrapeError(f"answer larger than {max_bytes:,} bytes")
                if time.monotonic() > deadline:
                    raise ScrapeError(f"no complete answer within {timeout:g} s")
                chunks.append(chunk)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ScrapeError(_reason(exc)) from None
        finally:
            r.release_conn()
    finally:
        pool.close()
    if watch.expired:
        raise ScrapeError(f"no complete answer within {timeout:g} s")
    return b"".join(chunks).decode("utf-8", "replace")


def _reason(exc: BaseException) -> str:
    """Why a request failed, in our own words: never the server's address (errors are stored, and staff's
    pages show them), never what the server sent (an SSH banner or a web page in an "invalid status
    line" message, a certificate's names)."""
    inner = getattr(exc, "reason", None) or exc
    text = str(inner).lower()
    # Refused and name errors first: urllib3's NewConnectionError is a subclass of its ConnectTimeoutError.
    if isinstance(inner, ConnectionRefusedError) or "refused" in text:
        return "connection refused"
    if isinstance(inner, (urllib3.exceptions.NameResolutionError, socket.gaierror)):
        return "host name not found"
    if isinstance(inner, (urllib3.exceptions.TimeoutError, TimeoutError)) or "timed out" in text:
        return "timed out"
    if isinstance(exc, urllib3.exceptions.SSLError) or isinstance(inner, ssl.SSLError):
        if "match" in text:
            return "TLS error: the certificate is for another host"
        if "verify failed" in text:
            return "TLS error: certificate not trusted"
        return "TLS error"
    if isinstance(exc, urllib3.exceptions.ProtocolError) or isinstance(inner, http.client.HTTPException):
        return "connection closed, or not an HTTP answer"
    if isinstance(inner, OSError):
        return "could not connect"
    return "scrape failed"


def parse_counters(text: str) -> dict[str, float]:
    """The counters of ``COUNTERS`` found in a Prometheus text answer, by sample field name."""
    wanted = {v: k for k, v in COUNTERS.items()}
    found: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in wanted and not sample.labels:
                    found[wanted[sample.name]] = float(sample.value)
    except (ValueError, TypeError, IndexError):
        # Not the parser's message: it quotes the line it choked on, i.e. the body of whatever answered.
        raise ScrapeError("not Prometheus text") from None
    if "tokens_predicted" not in found:
        raise ScrapeError("no llamacpp:tokens_predicted_total counter: is this a llama-server /metrics?")
    return found


@dataclass(frozen=True)
class Observed:
    """Traffic observed between the first and the latest good scrape of a deployment."""

    acceptance: float | None  # accepted ÷ drafted tokens, 0–1
    draft_tokens: int
    accepted_tokens: int
    tokens_per_second: float | None
    tokens_predicted: int
    samples: int  # good scrapes
    gaps: int  # failed scrapes
    resets: int  # server restarts detected
    since: datetime | None  # the first good scrape
    latest: datetime | None
    last_gap: datetime | None = None  # the latest failed scrape (not in to_dict: "telemetry" says it)

    @property
    def available(self) -> bool | None:
        """Whether the latest scrape worked; None before the first one."""
        if self.last_gap is None:
            return None if self.latest is None else True
        return self.latest is not None and self.latest > self.last_gap

    def to_dict(self) -> dict:
        return {
            "acceptance": self.acceptance,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "tokens_per_second": self.tokens_per_second,
            "tokens_predicted": self.tokens_predicted,
            "samples": self.samples,
            "gaps": self.gaps,
            "resets": self.resets,
            "since": self.since.isoformat() if self.since else None,
            "latest": self.latest.isoformat() if self.latest else None,
        }


def _delta(now: float | None, before: float | None) -> tuple[float | None, bool]:
    if now is None or before is None:
        return None, False
    if now < before:
        return now, True  # restarted: what it counted since then
    return now - before, False


def record(
    deployment: Deployment, *, counters: dict[str, float] | None, error: str = "", at: datetime | None = None
) -> TelemetrySample:
    """Store one scrape's outcome: deltas against the last good sample, a reset when a counter fell."""
    at = at or timezone.now()
    if counters is None:
        # Trimmed to a known reason here, so no stored error keeps what a server sent.
        return TelemetrySample.objects.create(
            deployment=deployment, scraped_at=at, ok=False, error=reason_to_store(error)[:ERROR_CHARS]
        )
    last = deployment.samples.filter(ok=True).order_by("-scraped_at", "-pk").first()
    values = {f"{name}_total": counters.get(name) for name in COUNTERS}
    deltas: dict[str, float | None] = {}
    reset = False
    for name in COUNTERS:
        d, r = _delta(counters.get(name), getattr(last, f"{name}_total") if last else None)
        deltas[name] = d
        reset |= r
    if reset:
        # One restart resets every counter: count each from zero, not just the ones that fell.
        deltas = {name: counters.get(name) for name in COUNTERS}
    return TelemetrySample.objects.create(
        deployment=deployment, scraped_at=at, ok=True, reset=reset, **values, **deltas
    )


def _read(url: str) -> dict[str, float] | ScrapeError:
    try:
        return parse_counters(fetch(metrics_url(url)))
    except ScrapeError as exc:
        return exc


def _recorded(deployment: Deployment, outcome: dict[str, float] | ScrapeError, at: datetime) -> TelemetrySample:
    if isinstance(outcome, ScrapeError):
        return record(deployment, counters=None, error=str(outcome), at=at)
    return record(deployment, counters=outcome, at=at)


def scrape(deployment: Deployment) -> TelemetrySample:
    """Read the deployment's /metrics once and record it (a failure is recorded as a gap, never raised).

    The sample is stamped with the time the scrape began, so a gap's time does not tell a time-out
    (stamped a deadline later) from a refused port."""
    if not deployment.url:
        raise ScrapeError(f"deployment {deployment.pk} has no URL to scrape")
    at = timezone.now()
    return _recorded(deployment, _read(deployment.url), at)


def scrape_active() -> list[TelemetrySample]:
    """One scrape of every active deployment with a URL (the beat's task): the reads run in parallel
    threads (the database writes stay in this one), so a round takes about one deadline per
    SCRAPE_THREADS slow servers, not one per server."""
    deployments = list(Deployment.objects.filter(retired_at__isnull=True).exclude(url="").order_by("pk"))
    if not deployments:
        return []
    at = timezone.now()
    with ThreadPoolExecutor(
        max_workers=min(SCRAPE_THREADS, len(deployments)), thread_name_prefix="specreg-scrapes"
    ) as pool:
        outcomes = list(pool.map(_read, [d.url for d in deployments]))
    return [_recorded(d, outcome, at) for d, outcome in zip(deployments, outcomes, strict=True)]


def run_queued_scrape(deployment_id: int) -> str:
    """A scrape someone asked for ("scrape now", queued by ``registry.team.scrape_queue.queue_scrape``), run by the
    telemetry worker:
    the page says it is running meanwhile, and shows its sample afterwards."""
    d = Deployment.objects.filter(pk=deployment_id).first()
    if d is None:
        return "gone"
    try:
        if not d.url:
            return "no URL"
        Deployment.objects.filter(pk=d.pk).update(scrape_started_at=timezone.now())
        return "ok" if scrape(d).ok else "gap"
    finally:
        Deployment.objects.filter(pk=d.pk).update(scrape_queued_at=None, scrape_started_at=None)


def observed(deployment: Deployment) -> Observed:
    """Sums of the deltas: the traffic between the first and the latest good scrape (one query, however
    many samples: the beat adds one a minute per deployment)."""
    good = Q(ok=True)
    a = deployment.samples.aggregate(
        drafted=Sum("draft_tokens", filter=good),
        accepted=Sum("accepted_tokens", filter=good),
        predicted=Sum("tokens_predicted", filter=good),
        seconds=Sum("tokens_predicted_seconds", filter=good),
        samples=Count("pk", filter=good),
        gaps=Count("pk", filter=Q(ok=False)),
        resets=Count("pk", filter=good & Q(reset=True)),
        since=Min("scraped_at", filter=good),
        latest=Max("scraped_at", filter=good),
        last_gap=Max("scraped_at", filter=Q(ok=False)),
    )
    drafted, accepted = a["drafted"] or 0, a["accepted"] or 0  # SUM of no rows (or only NULLs) is NULL
    predicted, seconds = a["predicted"] or 0, a["seconds"] or 0
    return Observed(
        acceptance=accepted / drafted if drafted > 0 else None,
        draft_tokens=int(drafted),
        accepted_tokens=int(accepted),
        tokens_per_second=predicted / seconds if seconds > 0 else None,
        tokens_predicted=int(predicted),
        samples=a["samples"],
        gaps=a["gaps"],
        resets=a["resets"],
        since=a["since"],
        latest=a["latest"],
        last_gap=a["last_gap"],
    )


def telemetry_state(deployment: Deployment, obs: Observed, user) -> dict:
    """Whether the latest scrape worked, and when; why not for staff only (everyone else reads PUBLIC_GAP)."""
    available = obs.available
    at = max((t for t in (obs.latest, obs.last_gap) if t is not None), default=None)
    message = None
    if available is False:
        message = PUBLIC_GAP
        if may_see_reasons(user):
            last = (
                deployment.samples.filter(ok=False)
                .order_by("-scraped_at", "-pk")
                .values_list("error", flat=True)
                .first()
            )
            message = shown_error(last or "", staff=True)
    return {"available": available, "at": at.isoformat() if at else None, "message": message}


@dataclass(frozen=True)
class Point:
    """One interval of observed traffic, for the plot: values None where the interval had none."""

    at: datetime
    acceptance: float | None
    tokens_per_second: float | None
    gap: str = ""  # a failed scrape: its reason for staff, PUBLIC_GAP for everyone else
    reset: bool = False


def series(deployment: Deployment, limit: int = 2000, *, staff: bool = False) -> list[Point]:
    """The latest ``limit`` samples as points: per-interval acceptance and tokens/s, and the gaps (with
    their reason when ``staff``)."""
    samples = list(deployment.samples.order_by("-scraped_at", "-pk")[:limit])[::-1]
    out = []
    for s in samples:
        if not s.ok:
            out.append(Point(s.scraped_at, None, None, gap=shown_error(s.error, staff=staff)))
            continue
        out.append(Point(s.scraped_at, s.acceptance, s.tokens_per_second, reset=s.reset))
    return out
