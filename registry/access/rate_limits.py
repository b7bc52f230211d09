"""Fixed-window request counts shared by every web process (kept in the database, see RateCount)."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import HttpRequest

from registry.access.client import client_ip
from registry.models import RateCount

WINDOW_S = 60
HOUR_S = 3600
# Keys counted per hour start with this (the rest per minute): each clean-up forgets only windows of
# its own length, so counting a check never wipes an hour's upload bytes.
HOURLY = "hour:"


class RateLimited(Exception):
    """Over the limit; the message is one line saying the limit and when to come back."""


def _window(key: str, now: float) -> tuple[int, int]:
    """(start, length) of ``key``'s current window: an hour for HOURLY keys, else a minute."""
    length = HOUR_S if key.startswith(HOURLY) else WINDOW_S
    return int(now // length) * length, length


def hit(key: str, limit: int, now: float | None = None, *, amount: int = 1) -> tuple[int, int]:
    """Count one request (or ``amount`` units of one, say KiB) for ``key`` in the current window:
    (count so far, seconds until the window ends)."""
    now = time.time() if now is None else now
    window, length = _window(key, now)
    created = False
    with transaction.atomic():
        if not RateCount.objects.filter(key=key, window=window).update(count=F("count") + amount):
            try:
                with transaction.atomic():
                    RateCount.objects.create(key=key, window=window, count=amount)
                created = True
            except IntegrityError:  # another process created it first
                RateCount.objects.filter(key=key, window=window).update(count=F("count") + amount)
        count = RateCount.objects.filter(key=key, window=window).values_list("count", flat=True).get()
    if created:  # once per window and key: forget windows of this length that are over
        old = RateCount.objects.filter(window__lt=window - length)
        old = old.filter(key__startswith=HOURLY) if length == HOUR_S else old.exclude(key__startswith=HOURLY)
        old.delete()
    return count, window + length - int(now)


def current(key: str, now: float | None = None) -> tuple[int, int]:
    """The count for ``key`` in the current window without counting: (count, seconds until the window ends)."""
    now = time.time() if now is None else now
    window, length = _window(key, now)
    count = RateCount.objects.filter(key=key, window=window).values_list("count", flat=True).first() or 0
    return count, window + length - int(now)


def check_rate(request: HttpRequest, scope: str = "check") -> None:
    """Count this request; raise RateLimited past the limit (per user when signed in, else per address)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        key, limit, who = f"{scope}:user:{user.pk}", settings.SPECREG_USER_CHECKS_PER_MINUTE, "this account"
    else:
        key, limit, who = f"{scope}:ip:{client_ip(request)}", settings.SPECREG_ANON_CHECKS_PER_MINUTE, "this address"
    count, wait = hit(key[:200], limit)
    if count > limit:
        more = "" if user is not None and user.is_authenticated else " (signed-in users may make more)"
        raise RateLimited(f"too many checks from {who}: at most {limit} a minute{more}; try again in {wait} s")


def check_upload(request: HttpRequest, nbytes: int, now: float | None = None) -> None:
    """Count an anonymous header upload of ``nbytes`` for its address; raise RateLimited past
    SPECREG_UPLOADS_PER_MINUTE uploads or SPECREG_UPLOAD_BYTES_PER_HOUR bytes.

    Each upload is parsed in the web process, so one address may not keep a worker busy with them. Bytes
    are counted in KiB (the count's 32 bits then hold 2 TiB), and an upload refused for its bytes is
    taken back out, so a client hammering the limit cannot grow the count.
    """
    now = time.time() if now is None else now
    who = client_ip(request)
    limit = settings.SPECREG_UPLOADS_PER_MINUTE
    count, wait = hit(f"upload:ip:{who}"[:200], limit, now)
    if count > limit:
        raise RateLimited(
            f"too many uploads from this address: at most {limit} a minute "
            f"(signed-in users may send more); try again in {wait} s"
        )
    budget = settings.SPECREG_UPLOAD_BYTES_PER_HOUR
    kib = -(-max(nbytes, 0) // 1024)
    key = f"{HOURLY}upload-bytes:ip:{who}"[:200]
    used, wait = hit(key, budget, now, amount=kib)
    if used * 1024 > budget and kib:
        RateCount.objects.filter(key=key, window=_window(key, now)[0]).update(count=F("count") - kib)
        raise RateLimited(
            f"too many header bytes from this address: at most {budget / 2**20:,.0f} MiB an hour "
            f"(signed-in users may send more); try again in {-(-wait // 60)} min"
        )
