"""Production telemetry: scrape a deployment's llama-server ``/metrics``, store the traffic since the last scrape.

llama-server started with ``--metrics`` exports Prometheus counters (``server_task_result_metrics::
to_metrics`` in tools/server/server-task.cpp of the pinned build): the ones read here are named in
``COUNTERS``. Acceptance observed is accepted ÷ drafted tokens over the deltas; tokens per second is
generated tokens ÷ the seconds llama.cpp spent generating them (its own clock, per request, so it is
the speed one user sees, comparable with the runner's measured tokens/s).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from .models import Deployment, TelemetrySample

# Sample field → the counter's full name in llama-server's /metrics (checked against the pinned
# source by tests/test_team_telemetry.py).
COUNTERS = {
    "draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "llamacpp:spec_decode_num_accepted_tokens_total",
    "drafts": "llamacpp:spec_decode_num_drafts_total",
    "tokens_predicted": "llamacpp:tokens_predicted_total",
    "tokens_predicted_seconds": "llamacpp:tokens_predicted_seconds_total",
}
ERROR_CHARS = 500

# One pool for every scrape: no retries and no redirects (a redirect could send the server to an
# address nobody entered), certificates checked as urllib3 does by default.
_http = urllib3.PoolManager(retries=False, headers={"Accept": "text/plain", "User-Agent": "specreg-telemetry"})


class ScrapeError(Exception):
    """The server could not be read, or did not answer with llama.cpp's metrics; one line."""


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


def fetch(url: str, *, timeout: float | None = None, max_bytes: int | None = None) -> str:
    """GET ``url`` within ``timeout`` seconds overall and ``max_bytes``; anything else is a ScrapeError."""
    timeout = float(settings.SPECREG_TELEMETRY_TIMEOUT_SECONDS if timeout is None else timeout)
    max_bytes = settings.SPECREG_TELEMETRY_MAX_BYTES if max_bytes is None else max_bytes
    deadline = time.monotonic() + timeout
    try:
        r = _http.request("GET", url, preload_content=False, redirect=False,
                          timeout=urllib3.Timeout(connect=timeout, read=timeout))
    except urllib3.exceptions.HTTPError as exc:
        raise ScrapeError(_reason(exc, url)) from None
    try:
        if r.status != 200:
            raise ScrapeError(f"HTTP {r.status}" + (" (was llama-server started with --metrics?)"
                                                         if r.status in (404, 501) else ""))
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
    except urllib3.exceptions.HTTPError as exc:
        raise ScrapeError(_reason(exc, url)) from None
    finally:
        r.release_conn()
    return b"".join(chunks).decode("utf-8", "replace")


def _reason(exc: Exception, url: str) -> str:
    """Why a request failed, without the server's address: errors are stored and shown to everyone (on the
    deployment page, its plot, the KB export) while the URL and host are for signed-in users only."""
    inner = getattr(exc, "reason", None) or exc
    text = str(inner)
    if "timed out" in text.lower():
        return "timed out"
    if "refused" in text.lower():
        return "connection refused"
    if isinstance(inner, urllib3.exceptions.NameResolutionError):
        return "host name not found"
    text = text.split(": ", 1)[-1]  # urllib3 starts with the connection: HTTPConnection(host=…, port=…)
    parts = urlsplit(url)
    for secret in (url, parts.netloc, parts.hostname or ""):
        if secret:
            text = re.sub(re.escape(secret), "(the server)", text, flags=re.IGNORECASE)
    return text[:200] or type(inner).__name__


def parse_counters(text: str) -> dict[str, float]:
    """The counters of ``COUNTERS`` found in a Prometheus text answer, by sample field name."""
    wanted = {v: k for k, v in COUNTERS.items()}
    found: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in wanted and not sample.labels:
                    found[wanted[sample.name]] = float(sample.value)
    except (ValueError, TypeError, IndexError) as exc:
        raise ScrapeError(f"not Prometheus text: {str(exc)[:200]}") from None
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

    def to_dict(self) -> dict:
        return {"acceptance": self.acceptance, "draft_tokens": self.draft_tokens,
                "accepted_tokens": self.accepted_tokens, "tokens_per_second": self.tokens_per_second,
                "tokens_predicted": self.tokens_predicted, "samples": self.samples, "gaps": self.gaps,
                "resets": self.resets, "since": self.since.isoformat() if self.since else None,
                "latest": self.latest.isoformat() if self.latest else None}


def _delta(now: float | None, before: float | None) -> tuple[float | None, bool]:
    if now is None or before is None:
        return None, False
    if now < before:
        return now, True  # restarted: what it counted since then
    return now - before, False


def record(deployment: Deployment, *, counters: dict[str, float] | None, error: str = "",
           at: datetime | None = None) -> TelemetrySample:
    """Store one scrape's outcome: deltas against the last good sample, a reset when a counter fell."""
    at = at or timezone.now()
    if counters is None:
        return TelemetrySample.objects.create(deployment=deployment, scraped_at=at, ok=False,
                                              error=(error or "failed")[:ERROR_CHARS])
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
    return TelemetrySample.objects.create(deployment=deployment, scraped_at=at, ok=True, reset=reset,
                                          **values, **deltas)


def scrape(deployment: Deployment) -> TelemetrySample:
    """Read the deployment's /metrics once and record it (a failure is recorded as a gap, never raised)."""
    if not deployment.url:
        raise ScrapeError(f"deployment {deployment.pk} has no URL to scrape")
    try:
        counters = parse_counters(fetch(metrics_url(deployment.url)))
    except ScrapeError as exc:
        return record(deployment, counters=None, error=str(exc))
    return record(deployment, counters=counters)


def scrape_active() -> list[TelemetrySample]:
    """One scrape of every active deployment with a URL (the beat's task)."""
    out = []
    for d in Deployment.objects.filter(retired_at__isnull=True).exclude(url="").order_by("pk"):
        out.append(scrape(d))
    return out


def observed(deployment: Deployment) -> Observed:
    """Sums of the deltas: the traffic between the first and the latest good scrape (one query, however
    many samples: the beat adds one a minute per deployment)."""
    good = Q(ok=True)
    a = deployment.samples.aggregate(
        drafted=Sum("draft_tokens", filter=good), accepted=Sum("accepted_tokens", filter=good),
        predicted=Sum("tokens_predicted", filter=good), seconds=Sum("tokens_predicted_seconds", filter=good),
        samples=Count("pk", filter=good), gaps=Count("pk", filter=Q(ok=False)),
        resets=Count("pk", filter=good & Q(reset=True)),
        since=Min("scraped_at", filter=good), latest=Max("scraped_at", filter=good))
    drafted, accepted = a["drafted"] or 0, a["accepted"] or 0  # SUM of no rows (or only NULLs) is NULL
    predicted, seconds = a["predicted"] or 0, a["seconds"] or 0
    return Observed(
        acceptance=accepted / drafted if drafted > 0 else None, draft_tokens=int(drafted),
        accepted_tokens=int(accepted), tokens_per_second=predicted / seconds if seconds > 0 else None,
        tokens_predicted=int(predicted), samples=a["samples"], gaps=a["gaps"], resets=a["resets"],
        since=a["since"], latest=a["latest"])


@dataclass(frozen=True)
class Point:
    """One interval of observed traffic, for the plot: values None where the interval had none."""

    at: datetime
    acceptance: float | None
    tokens_per_second: float | None
    gap: str = ""  # a failed scrape's error
    reset: bool = False


def series(deployment: Deployment, limit: int = 2000) -> list[Point]:
    """The latest ``limit`` samples as points: per-interval acceptance and tokens/s, and the gaps."""
    samples = list(deployment.samples.order_by("-scraped_at", "-pk")[:limit])[::-1]
    out = []
    for s in samples:
        if not s.ok:
            out.append(Point(s.scraped_at, None, None, gap=s.error))
            continue
        out.append(Point(s.scraped_at, s.acceptance, s.tokens_per_second, reset=s.reset))
    return out
