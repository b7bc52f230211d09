"""Who a request comes from: the client address, believing X-Forwarded-For only from named proxies."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    """REMOTE_ADDR, or behind a proxy in SPECREG_TRUSTED_PROXIES the last address it did not add itself."""
    remote = request.META.get("REMOTE_ADDR", "")
    trusted = settings.SPECREG_TRUSTED_PROXIES
    if remote not in trusted:
        return remote
    hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
    # Each trusted proxy appends the address it saw; the first untrusted one from the right is the client.
    for hop in reversed(hops):
        if hop not in trusted:
            return hop
    return remote
