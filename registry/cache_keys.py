"""Short-lived caches of table work, all dropped at once when the registry changes.

Every write that changes what the table shows (registration, new results) bumps a generation
number that is part of every key. This process sees it at once; other processes keep their own
cache (unless a shared backend is configured) and catch up within the TTL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.core.cache import cache

T = TypeVar("T")
TTL = settings.SPECREG_TABLE_CACHE_SECONDS  # 0 turns caching off
GENERATION_KEY = "registry:generation"


def bump_generation() -> None:
    try:
        cache.incr(GENERATION_KEY)
    except ValueError:  # not set yet (or evicted)
        cache.set(GENERATION_KEY, 1, None)


def cached(name: str, key: str, compute: Callable[[], T], ttl: int | None = None, *, viewer: str = "") -> T:
    """``compute()``, remembered for ``ttl`` seconds (default TTL) in this registry generation.

    ``viewer`` names what the viewer may see where the answer depends on it (the table's "public" or "paths",
    registry.table.request.TableQuery.viewer): it is part of the key, so work done for a viewer who may see server
    paths is never served to one who may not, nor the other way round.
    """
    ttl = TTL if ttl is None else ttl
    if ttl <= 0:
        return compute()
    digest = hashlib.sha1(
        key.encode(), usedforsecurity=False
    ).hexdigest()  # any text (searches, spaces) makes a safe key
    full = f"registry:{name}:{viewer}:{cache.get(GENERATION_KEY, 0)}:{digest}"
    value = cache.get(full)
    if value is None:
        value = compute()
        cache.set(full, value, ttl)
    return value
