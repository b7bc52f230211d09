"""SPECREG_LOGIN_REQUIRED: an installation that holds private models shows nothing to strangers.

By default the registry is a public read-only site (anonymous visitors browse the table, pages and
JSON). A team that imports from private or gated repositories with the server's token sets
``SPECREG_LOGIN_REQUIRED=1``: every page then sends a visitor who is not signed in to the login page,
and every ``/api/`` answer is 401 without a session or an API token. Django's own
``LoginRequiredMiddleware`` is not used because it knows nothing of API tokens: it would send a
team's CI, which signs its requests with a token, to a login form.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import resolve_url

# Reachable while signed out: signing in itself, and resetting a forgotten password.
OPEN_PREFIXES = ("/accounts/login/", "/accounts/password_reset/", "/accounts/reset/")


def _token_user(request: HttpRequest):
    """The user an ``Authorization: Token …`` header names, or None (knox checks the digest and expiry)."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Token "):
        return None
    from knox.auth import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    try:
        user, _ = TokenAuthentication().authenticate_credentials(header[len("Token ") :].strip().encode())
    except AuthenticationFailed:
        return None
    return user


class LoginRequiredMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            not settings.SPECREG_LOGIN_REQUIRED
            or request.user.is_authenticated
            or request.path.startswith(OPEN_PREFIXES)
            or request.path.startswith("/" + settings.STATIC_URL.lstrip("/"))
        ):
            return self.get_response(request)
        if request.path.startswith("/api/"):
            if _token_user(request) is not None:
                return self.get_response(request)  # the view authenticates the token again, as always
            return JsonResponse(
                {
                    "error": "this installation requires signing in: send an API token "
                    "(Authorization: Token …) or a session"
                },
                status=401,
            )
        return HttpResponseRedirect(f"{resolve_url(settings.LOGIN_URL)}?next={quote(request.get_full_path())}")
