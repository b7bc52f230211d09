"""Failed logins: a lock-out per username *and* address together (django-axes), and a per-address throttle.

Locking a username after failures from anywhere lets a stranger lock any user out; locking an
address locks out every account behind it (an office NAT). So django-axes locks only the pair
(``AXES_LOCKOUT_PARAMETERS``), and a client guessing many usernames from one address is slowed by
a throttle instead: past SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE failed logins in a minute,
that address alone gets 429 on the login form until the window ends (counted in the database,
shared by every web process, as ``rate_limits`` counts checks). Every login form is guarded, the
admin's too: the views are known by their URL names (or as Django's LoginView), not by one path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse

from registry.access.client import client_ip
from registry.access.rate_limits import WINDOW_S, current, hit

# The login forms' URL names: django.contrib.auth's (LOGIN_URL) and the admin's. Each POST to one ends in
# authenticate(), which is what axes counts; a form that is not guarded here would be an unthrottled one.
LOGIN_VIEW_NAMES = frozenset({"login", "admin:login"})


def _key(request: HttpRequest) -> str:
    return f"login-fail:ip:{client_ip(request)}"[:200]


def count_failure(sender, credentials=None, request: HttpRequest | None = None, **kwargs) -> None:
    """``user_login_failed`` receiver: one more failure for the request's address."""
    if request is not None:
        hit(_key(request), settings.SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE)


class LoginThrottleMiddleware:
    """Answers 429 to a POST to any login form from an address past its failures this minute (before axes or
    the form)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        # After URL resolution, before the view: whatever path reached a login form, it is known by its name.
        if request.method != "POST" or not _is_login_view(request, view_func):
            return None
        limit = settings.SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE
        count, wait = current(_key(request))
        if count < limit:
            return None
        return HttpResponse(
            f"too many failed logins from this address: at most {limit} a minute; "
            f"try again in {min(wait, WINDOW_S)} s\n",
            status=429,
            content_type="text/plain; charset=utf-8",
        )


def _is_login_view(request: HttpRequest, view_func: Callable[..., Any]) -> bool:
    match = request.resolver_match
    if match is not None and match.view_name in LOGIN_VIEW_NAMES | {settings.LOGIN_URL}:
        return True
    view_class = getattr(view_func, "view_class", None)  # a LoginView mounted under another name
    return isinstance(view_class, type) and issubclass(view_class, LoginView)
