"""Server paths never reach anonymous visitors: the folders of registered local files, the data folder,
the installation and the home folder are cut out of every page, JSON answer and CSV sent to them.

Done once, on the way out, rather than in each template and serializer: a page or endpoint added later
that prints a path (a llama-server command, a run's log line, an inspection's ``source``) is covered
without remembering to be. Files keep their names (``…/x.gguf`` becomes ``x.gguf``); signed-in users
see everything.
"""

from __future__ import annotations

import html
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import cast

from django.conf import settings
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse

from registry.access.policy import may_see_paths
from registry.models import GGUFFile

# Every type a page, answer or download is sent as: /runs/N/report is Markdown, its unit and command plain text.
TEXT_TYPES = ("text/html", "application/json", "text/csv", "text/plain", "text/markdown")

_lock = threading.Lock()
_memo: tuple[object, list[tuple[bytes, bytes]]] | None = None


def server_dirs() -> list[str]:
    """Every folder to hide, longest first (so a folder inside another is cut whole)."""

    dirs = {
        str(settings.DATA_DIR),
        str(settings.SPECREG_MODEL_DIR),
        str(settings.BASE_DIR),
        sys.prefix,
        os.path.expanduser("~"),
    }
    for source in _local_sources(GGUFFile).values_list("source", flat=True).iterator():
        dirs.add(os.path.dirname(source))
    return sorted({d.rstrip("/") for d in dirs if d and d.rstrip("/")}, key=len, reverse=True)


def _local_sources(model):
    return model.objects.exclude(source__startswith="hf://")


def replacements() -> list[tuple[bytes, bytes]]:
    """(what, by what) pairs in bytes, for the folders as they appear raw, HTML-escaped and JSON-escaped."""
    global _memo

    # Recomputed only when the local files change: one small aggregate query per anonymous response.
    stamp = tuple(_local_sources(GGUFFile).aggregate(n=Count("pk"), last=Max("inspected_at")).values())
    with _lock:
        if _memo is not None and _memo[0] == stamp:
            return _memo[1]
    pairs = []
    for d in server_dirs():
        for form in {d + "/", html.escape(d + "/"), json.dumps(d + "/")[1:-1]}:
            pairs.append((form.encode(), b""))
    with _lock:
        _memo = (stamp, pairs)
    return pairs


def redact(data: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    for what, by in pairs:
        if what in data:
            data = data.replace(what, by)
    return data


def redact_text(text: str, pairs: list[tuple[bytes, bytes]]) -> str:
    """One value with the server folders cut out, before it is escaped for a format the middleware's byte-level
    pass could no longer see through (a CSV cell's formula escape: ``/srv/m/=HYPERLINK(…)`` needs none, and
    ``=HYPERLINK(…)`` once the folder is cut does)."""
    data = text.encode()
    return redact(data, pairs).decode() if b"/" in data else text


def _stream(chunks: Iterable[bytes], pairs: list[tuple[bytes, bytes]]) -> Iterator[bytes]:
    for chunk in chunks:  # a chunk is a whole row or object: a path is never split across two
        yield redact(chunk, pairs)


class HideServerPathsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if may_see_paths(getattr(request, "user", None)):
            return response
        if not response.get("Content-Type", "").startswith(TEXT_TYPES):
            return response
        pairs = replacements()
        if isinstance(response, StreamingHttpResponse):  # what response.streaming says
            # A WSGI site (no ASGI entry, no async views): every streamed body is a plain iterator.
            response.streaming_content = _stream(cast(Iterator[bytes], response.streaming_content), pairs)
        elif isinstance(response, HttpResponse):  # every other response
            response.content = redact(response.content, pairs)
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
        return response
