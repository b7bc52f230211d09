"""At most SPECREG_CRAWL_PER_HOST repositories read from one Hub host at once, by every crawl worker together.

Hand-written rather than a Celery rate limit (per worker process, not per host) or a Redis semaphore (the
embedded default has no Redis): each place is a HostSlot row taken by one conditional UPDATE, which is atomic on
SQLite and PostgreSQL alike, and held until a time its holder keeps moving on. A killed holder cannot free it, so
its time running out does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from registry.models import HostSlot


@contextmanager
def host_slot(host: str, holder: str, limit: int, hold_seconds: float) -> Iterator[Callable[[], None] | None]:
    """Within: one of ``limit`` places for ``host`` held by ``holder``, and a function that holds it
    ``hold_seconds`` longer; or None when every place is taken (the caller comes back later)."""
    limit = max(1, limit)
    HostSlot.objects.bulk_create([HostSlot(host=host, slot=n) for n in range(limit)], ignore_conflicts=True)
    taken = None
    for n in range(limit):
        now = timezone.now()
        free = Q(holder="") | Q(until__lt=now)
        if HostSlot.objects.filter(free, host=host, slot=n).update(
            holder=holder, until=now + timedelta(seconds=hold_seconds)
        ):
            taken = n
            break
    if taken is None:
        yield None
        return
    mine = HostSlot.objects.filter(host=host, slot=taken, holder=holder)

    def renew() -> None:
        mine.update(until=timezone.now() + timedelta(seconds=hold_seconds))

    try:
        yield renew
    finally:
        mine.update(holder="", until=None)
