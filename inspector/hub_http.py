"""One HTTP request to the Hub or a server under a deadline: streamed, redirects checked, error answers and
bodies bounded, failures said in one line (private, gated and missing alike where the token is withheld)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx2
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import hf_raise_for_status

from .deadlines import Deadline
from .errors import SourceError, Unreachable
from .hf_spec import HfSpec, hub_endpoint
from .hub_names import hub_token, token_withheld

MAX_REDIRECTS = 10


MAX_ERROR_BODY = 64 << 10  # of an error answer's body, read for its message


def request_token() -> bool | str | None:
    return hub_token()


def url_origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def describe(exc: BaseException, spec: HfSpec | None = None, deadline: Deadline | None = None) -> str:
    """One line for a network or Hub error; huggingface_hub's own messages run to several lines."""
    if deadline is not None and isinstance(exc, httpx2.TimeoutException) and deadline.passed():
        # The timeout was cut short by the whole read's deadline: say that, not "read timed out".
        return deadline.reason
    repo = spec.repo_id if spec else "the repository"
    if token_withheld() and private_or_missing(exc):
        # Read for someone who may not use the server's token: private, gated and missing must read
        # alike, or the answer tells them which private repositories exist.
        return NOT_PUBLIC
    if isinstance(exc, GatedRepoError):  # before RepositoryNotFoundError, its base class
        if request_token():
            return f"{repo} is gated and the token in HF_TOKEN has no access (request access on its model page)"
        return f"{repo} is gated or private: set HF_TOKEN to a token with access"
    if isinstance(exc, RepositoryNotFoundError):
        hint = "" if request_token() else " (if it is private or gated, set HF_TOKEN)"
        return f"repository {repo} not found{hint}"
    if isinstance(exc, RevisionNotFoundError):
        return f"revision {spec.revision if spec else '?'!r} not found in {repo}"
    if isinstance(exc, EntryNotFoundError):
        where = f"{repo}@{spec.revision}" if spec and spec.revision else repo
        return f"file {spec.path if spec else '?'!r} not found in {where}"
    if isinstance(exc, HfHubHTTPError) and exc.response is not None:
        status = exc.response.status_code
        if status in (401, 403):
            return f"access denied (HTTP {status}): gated or private: set HF_TOKEN to a token with access"
        if status == 416:
            return "requested range not satisfiable (HTTP 416)"
        detail = (exc.server_message or "").strip().splitlines()
        return f"HTTP {status}" + (f": {detail[0]}" if detail else "")
    if isinstance(exc, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set, so the Hub cannot be reached"
    if isinstance(exc, httpx2.ConnectError):
        try:
            host = exc.request.url.host
        except RuntimeError:  # httpx2 raises when the error carries no request
            host = "the server"
        return f"cannot connect to {host} ({str(exc).splitlines()[0] if str(exc) else 'connection failed'})"
    if isinstance(exc, httpx2.TimeoutException):
        return f"timed out ({type(exc).__name__})"
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0]}" if first else type(exc).__name__


NOT_PUBLIC = (
    "not found, or not public (private and gated files are read only for signed-in users "
    "allowed to use the server's Hugging Face token)"
)


def private_or_missing(exc: BaseException) -> bool:
    if isinstance(exc, (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError)):
        return True  # GatedRepoError is a RepositoryNotFoundError
    return isinstance(exc, HfHubHTTPError) and exc.response is not None and exc.response.status_code in (401, 403, 404)


# Errors that mean "the network or the server said no", as opposed to bugs; ValueError covers bad JSON answers.
NET_ERRORS = (OSError, httpx2.HTTPError, ValueError)


# Of those, the ones where no server answered at all.
UNREACHABLE = (httpx2.ConnectError, httpx2.TimeoutException, OfflineModeIsEnabled, ConnectionError)


def net_error(
    name: str, exc: BaseException, spec: HfSpec | None = None, deadline: Deadline | None = None
) -> SourceError:
    """The one-line SourceError for a network error, typed Unreachable when no server answered."""
    if deadline is not None and deadline.passed():
        # the deadline's watchdog (or the last timeout it cut short) ended the read: say that
        return deadline.error(name)
    kind = Unreachable if isinstance(exc, UNREACHABLE) else SourceError
    return kind(f"{name}: {describe(exc, spec, deadline)}")


@contextmanager
def stream_request(
    name: str, url: str, headers: dict[str, str], deadline: Deadline, *, follow_redirects: bool
) -> Iterator[httpx2.Response]:
    """GET ``url`` through the deadline's client as a stream, waiting for the answer no longer than the deadline.

    Timeouts bound each socket read, so a server dribbling its status line and headers a byte at a
    time never trips them. So the request is sent from a helper thread that the deadline can walk
    away from; when it passes, the deadline's watchdog shuts the socket that thread waits on, so it
    ends too, and it closes the answer should one still arrive. (The body is read here: ``receive``.)
    """
    session = deadline.client()
    request = session.build_request(
        "GET", url, headers=headers, timeout=deadline.timeout(name), extensions={"trace": deadline.trace}
    )
    box: dict[str, Any] = {}
    abandoned = threading.Event()

    def send() -> None:
        try:
            box["response"] = session.send(request, stream=True, follow_redirects=follow_redirects)
        except BaseException as exc:  # handed to the waiting thread, which raises it
            box["error"] = exc
            return
        if abandoned.is_set():
            box["response"].close()

    sender = threading.Thread(target=send, name="specreg-range-get", daemon=True)
    sender.start()
    sender.join(max(0.0, deadline.at - time.monotonic()))
    if sender.is_alive():
        abandoned.set()
        if "response" in box:  # it arrived between the join and the flag
            box["response"].close()
        raise deadline.error(name)
    if "error" in box:
        raise box["error"]
    response: httpx2.Response = box["response"]
    try:
        yield response
    finally:
        response.close()


def raise_for_error(r: httpx2.Response) -> None:
    """huggingface_hub's error for an error answer (gated, missing repo/revision/file), from at most
    MAX_ERROR_BODY bytes of its body: it reads the whole body for its message, so it gets a copy."""
    if r.status_code < 400:
        return
    body = bytearray()
    for chunk in r.iter_bytes():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    dropped = ("content-length", "content-encoding", "transfer-encoding")
    headers = {k: v for k, v in r.headers.items() if k.lower() not in dropped}
    hf_raise_for_status(
        httpx2.Response(r.status_code, headers=headers, content=bytes(body[:MAX_ERROR_BODY]), request=r.request)
    )


def receive(name: str, r: httpx2.Response, want: int, deadline: Deadline) -> bytes:
    """At most ``want`` bytes of the body. A chunk read blocked past the deadline is ended by its watchdog
    (a slow drip never times out), and the deadline is checked between chunks."""
    data = bytearray()
    for chunk in r.iter_bytes():
        data += chunk
        if len(data) >= want:
            break
        deadline.check(name)
    if len(data) < want and deadline.passed():  # the watchdog cut the body short: not the file's end
        raise deadline.error(name)
    return bytes(data[:want])


def same_origin(name: str, url: str) -> None:
    """SourceError unless ``url`` is on the Hub's own origin: a listing must not send the token anywhere else."""
    try:
        origin = url_origin(url)
    except ValueError as exc:  # "http://host:+19151/…": urlsplit reads it, .port raises
        raise SourceError(f"{name}: its next page {no_address(url, exc)}") from None
    if origin != url_origin(hub_endpoint()):
        raise SourceError(f"{name}: a next page on another host ({origin[1]}) is not followed")


def no_address(url: str, exc: ValueError) -> str:
    return f"{url[:200]!r} is no address ({str(exc)[:200]})"
