"""Fixed-window request counts shared by every web process (kept in the database, see RateCount)."""
from __future__ import annotations

import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import HttpRequest

from .client import client_ip
from .models import RateCount

WINDOW_S = 60


class RateLimited(Exception):
    """Over the limit; the message is one line saying the limit and when to come back."""


def hit(key: str, limit: int, now: float | None = None) -> tuple[int, int]:
    """Count one request for ``key`` in the current window: (count so far, seconds until the window ends)."""
    now = time.time() if now is None else now
    window = int(now // WINDOW_S) * WINDOW_S
    with transaction.atomic():
        if not RateCount.objects.filter(key=key, window=window).update(count=F("count") + 1):
            try:
                with transaction.atomic():
                    RateCount.objects.create(key=key, window=window, count=1)
            except IntegrityError:  # another process created it first
                RateCount.objects.filter(key=key, window=window).update(count=F("count") + 1)
        count = RateCount.objects.filter(key=key, window=window).values_list("count", flat=True).get()
    if count == 1:  # once per window and key: forget windows that are over
        RateCount.objects.filter(window__lt=window - WINDOW_S).delete()
    return count, window + WINDOW_S - int(now)


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
