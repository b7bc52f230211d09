"""Failed logins: a lock-out per username *and* address together (django-axes), and a per-address throttle.

Locking a username after failures from anywhere lets a stranger lock any user out; locking an
address locks out every account behind it (an office NAT). So django-axes locks only the pair
(``AXES_LOCKOUT_PARAMETERS``), and a client guessing many usernames from one address is slowed by
a throttle instead: past SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE failed logins in a minute,
that address alone gets 429 on the login form until the window ends (counted in the database,
shared by every web process, as ``rate_limits`` counts checks).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from registry.access.client import client_ip
from registry.access.rate_limits import WINDOW_S, current, hit

LOGIN_PATH = "/accounts/login/"


def _key(request: HttpRequest) -> str:
    return f"login-fail:ip:{client_ip(request)}"[:200]


def count_failure(sender, credentials=None, request: HttpRequest | None = None, **kwargs) -> None:
    """``user_login_failed`` receiver: one more failure for the request's address."""
    if request is not None:
        hit(_key(request), settings.SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE)


class LoginThrottleMiddleware:
    """Answers 429 to a login POST from an address past its failures this minute (before axes or the form)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path == LOGIN_PATH:
            limit = settings.SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE
            count, wait = current(_key(request))
            if count >= limit:
                return HttpResponse(
                    f"too many failed logins from this address: at most {limit} a minute; "
                    f"try again in {min(wait, WINDOW_S)} s\n",
                    status=429,
                    content_type="text/plain; charset=utf-8",
                )
        return self.get_response(request)
