"""GGUF files on the Hugging Face Hub (``hf://OWNER/REPO[@REV]/PATH``) or any HTTP server, read by Range requests."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

import httpx2
from huggingface_hub import constants, get_session, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import ModelInfo
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, validate_repo_id

from .errors import DeadlineExceeded, SourceError, Unreachable
from .hub_names import NON_MODEL_PREFIXES, hf_source, hub_token, token_withheld
from .readahead import FIRST_READ

# huggingface_hub's shared client has no timeout at all; a dead host must fail fast, a slow CDN may take a while.
READ_TIMEOUT, CONNECT_TIMEOUT = 30.0, 10.0
DEFAULT_HEADER_DEADLINE = 60.0  # seconds for one whole header read; see header_deadline_seconds
MAX_REDIRECTS = 10
MAX_ERROR_BODY = 64 << 10  # of an error answer's body, read for its message
MAX_API_BODY = 64 << 20  # of a Hub API answer (a listing of thousands of files is a few MB)


def header_deadline_seconds() -> float:
    """SPECREG_HEADER_DEADLINE_SECONDS (default 60): the most one remote header read may take, all requests together.

    Timeouts apply to each socket read, so a server that sends a byte every few seconds would never
    trip them; this bounds the whole read.
    """
    value = os.environ.get("SPECREG_HEADER_DEADLINE_SECONDS", "").strip()
    try:
        seconds = float(value) if value else DEFAULT_HEADER_DEADLINE
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise SourceError(f"SPECREG_HEADER_DEADLINE_SECONDS: expected a positive number of seconds, got {value!r}")
    return seconds


class Deadline:
    """The end of the remote reads of one request or job, shared by all of them: both files of a check,
    every shard, every request, headers included. Each request's timeouts are cut to what is left.

    Socket timeouts bound one read each, so a server sending a byte at a time never trips them, and a
    helper thread still waiting for an answer keeps its socket. So the reads go through an HTTP client
    of the deadline's own, and a watchdog shuts down every socket it opened once the deadline passes:
    a read blocked on one, in any thread, returns at once and fails. ``close`` (or leaving ``with``)
    ends them all for good and stops the watchdog.
    """

    def __init__(self, seconds: float | None = None, *, reason: str | None = None) -> None:
        self.seconds = header_deadline_seconds() if seconds is None else seconds
        self.at = time.monotonic() + self.seconds
        # What the one-line error says after the source's name.
        self.reason = reason or (
            f"the header was not read within {self.seconds:g} s (SPECREG_HEADER_DEADLINE_SECONDS); "
            "the server is too slow"
        )
        # Inside a job (job_deadline), every read ends by the job's end too, and then says so.
        job = _JOB.get()
        if job is not None and job.at < self.at:
            self.at, self.reason = job.at, job.reason
        self._lock = threading.Lock()
        self._client: httpx2.Client | None = None
        self._streams: list[Any] = []  # the network streams (connections) its client opened
        self._watchdog: threading.Timer | None = None
        self.expired = False  # the watchdog shut the sockets (or the deadline was closed)

    def client(self) -> httpx2.Client:
        """The HTTP client for these reads, made on first use along with the watchdog that ends them."""
        with self._lock:
            if self._client is None:
                # As huggingface_hub's shared client (its request hooks: offline mode, request ids, read from
                # the public client rather than its private module), but with connections of its own: the
                # watchdog may shut them without touching anyone else's reads.
                hooks = list(get_session().event_hooks.get("request", []))
                self._client = httpx2.Client(event_hooks={"request": hooks}, timeout=None)
                self._watchdog = threading.Timer(max(0.0, self.at - time.monotonic()), self._shut_sockets)
                self._watchdog.daemon = True
                self._watchdog.start()
            return self._client

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: remember each connection as it opens (its TLS layer too)."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            with self._lock:
                self._streams.append(stream)
                late = self.expired
            if late:  # opened after the end: no read may start on it
                _shut(stream)

    def _shut_sockets(self) -> None:
        with self._lock:
            self.expired = True
            streams = list(self._streams)
        for stream in streams:
            _shut(stream)

    def close(self) -> None:
        """End every connection of these reads (a helper thread may still wait on one) and the watchdog."""
        with self._lock:
            watchdog, client = self._watchdog, self._client
        if watchdog is not None:
            watchdog.cancel()
        self._shut_sockets()
        if client is not None:
            client.close()

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self, name: str) -> float:
        """Seconds left; raises the one-line error once none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise self.error(name)
        return left

    def error(self, name: str) -> DeadlineExceeded:
        return DeadlineExceeded(f"{name}: {self.reason}")

    def timeout(self, name: str) -> httpx2.Timeout:
        left = self.check(name)
        return httpx2.Timeout(min(READ_TIMEOUT, left), connect=min(CONNECT_TIMEOUT, left))

    def passed(self) -> bool:
        return self.expired or time.monotonic() >= self.at


_JOB: ContextVar[Deadline | None] = ContextVar("specreg_job_deadline", default=None)


@contextmanager
def job_deadline(seconds: float, reason: str) -> Iterator[Deadline]:
    """Within: one end for every remote read of a background job (an import of many files, a draft search).

    Each read keeps its own deadline (SPECREG_HEADER_DEADLINE_SECONDS for a file) but ends by the job's
    end at the latest, its watchdog shutting the socket then; a read begun after the end fails at once,
    without a request. ``reason`` is what such a read's error says after the source's name."""
    deadline = Deadline(seconds, reason=reason)
    token = _JOB.set(deadline)
    try:
        yield deadline
    finally:
        _JOB.reset(token)
        deadline.close()


def current_job_deadline() -> Deadline | None:
    """The deadline of the job running in this context (``job_deadline``), or None."""
    return _JOB.get()


def _shut(stream: Any) -> None:
    """Shut a connection's socket down both ways: a read blocked on it returns at once (closing the socket
    alone would leave that read waiting). A plain socket under TLS is detached already: nothing to do."""
    try:
        sock = stream.get_extra_info("socket")
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError, ValueError):
        pass


# What follows '@': PR and conversion refs contain '/', so they are matched before a plain name (as HfFileSystem does).
_HF_SPEC = re.compile(
    r"hf://(?P<repo>[^/@]+/[^/@]+)(?:@(?P<rev>refs/pr/\d+|refs/convert/[\w.-]+|[^/]+))?(?:/(?P<path>.*))?", re.S
)


@dataclass(frozen=True)
class HfSpec:
    repo_id: str
    revision: str | None  # None means the Hub's default branch
    path: str

    def __str__(self) -> str:
        return hf_source(self.repo_id, self.revision, self.path)


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int | None
    etag: str | None  # the LFS sha256 for LFS files (what HttpSource.etag reports), else the git blob id
    gated: bool


@dataclass(frozen=True)
class RepoListing:
    repo_id: str
    commit: str | None
    files: list[RemoteFile]
    base_models: list[str] = field(default_factory=list)  # the card's base_model, as the Hub's model tree names it

    def spec(self, path: str) -> str:
        """The hf:// spec of ``path`` pinned to the listed commit, so later reads see the same bytes."""
        return hf_source(self.repo_id, self.commit, path)


def _endpoint() -> str:
    # huggingface_hub froze HF_ENDPOINT into constants.ENDPOINT at import; read it again at call time.
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def hub_host() -> str:
    """The Hub's host (and port) as HF_ENDPOINT names it: what a crawl's limit per host counts."""
    return urlsplit(_endpoint()).netloc


def _token() -> bool | str | None:
    return hub_token()


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def parse_hf_spec(spec: str) -> HfSpec:
    """Split ``hf://OWNER/REPO[@REVISION]/PATH``; the revision may be url-encoded (``refs%2Fpr%2F1``)."""
    if not spec.startswith("hf://"):
        raise SourceError(f"{spec}: not an hf:// spec")
    if spec.startswith("hf:///"):
        raise SourceError(f"{spec}: absolute path; expected hf://OWNER/REPO[@REVISION]/PATH")
    m = _HF_SPEC.fullmatch(spec)
    if m is None:
        raise SourceError(f"{spec}: expected hf://OWNER/REPO[@REVISION]/PATH")
    repo_id, path = m["repo"], m["path"]
    if repo_id.split("/")[0] in NON_MODEL_PREFIXES:
        raise SourceError(f"{spec}: only model repositories are supported")
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise SourceError(f"{spec}: invalid repository id {repo_id!r}") from None
    if not path:
        raise SourceError(f"{spec}: missing the file path after the repository (hf://OWNER/REPO/PATH)")
    if path.startswith("/"):
        raise SourceError(f"{spec}: the path in the repository must be relative")
    if any(_dot_segment(part) for part in path.split("/")):
        raise SourceError(f"{spec}: the path may not contain '..', '.' or empty components, even percent-encoded")
    revision = unquote(m["rev"]) if m["rev"] else None
    if revision is not None and any(_dot_segment(part) for part in revision.split("/")):
        # '..' in the revision would climb out of /resolve/ once the URL is normalised, token and all.
        raise SourceError(f"{spec}: the revision may not contain '..', '.' or empty components, even percent-encoded")
    return HfSpec(repo_id, revision, path)


def _dot_segment(part: str) -> bool:
    """True for '', '.', '..' and any percent-encoding of them (decoded until nothing changes)."""
    for _ in range(5):
        if part in ("", ".", ".."):
            return True
        decoded = unquote(part)
        if decoded == part:
            return False
        part = decoded
    return True  # encoded five times over: no honest name looks like that


def _describe(exc: BaseException, spec: HfSpec | None = None, deadline: Deadline | None = None) -> str:
    """One line for a network or Hub error; huggingface_hub's own messages run to several lines."""
    if deadline is not None and isinstance(exc, httpx2.TimeoutException) and deadline.passed():
        # The timeout was cut short by the whole read's deadline: say that, not "read timed out".
        return deadline.reason
    repo = spec.repo_id if spec else "the repository"
    if token_withheld() and _private_or_missing(exc):
        # Read for someone who may not use the server's token: private, gated and missing must read
        # alike, or the answer tells them which private repositories exist.
        return NOT_PUBLIC
    if isinstance(exc, GatedRepoError):  # before RepositoryNotFoundError, its base class
        if _token():
            return f"{repo} is gated and the token in HF_TOKEN has no access (request access on its model page)"
        return f"{repo} is gated or private: set HF_TOKEN to a token with access"
    if isinstance(exc, RepositoryNotFoundError):
        hint = "" if _token() else " (if it is private or gated, set HF_TOKEN)"
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


def _private_or_missing(exc: BaseException) -> bool:
    if isinstance(exc, (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError)):
        return True  # GatedRepoError is a RepositoryNotFoundError
    return isinstance(exc, HfHubHTTPError) and exc.response is not None and exc.response.status_code in (401, 403, 404)


# Errors that mean "the network or the server said no", as opposed to bugs; ValueError covers bad JSON answers.
_NET_ERRORS = (OSError, httpx2.HTTPError, ValueError)
# Of those, the ones where no server answered at all.
_UNREACHABLE = (httpx2.ConnectError, httpx2.TimeoutException, OfflineModeIsEnabled, ConnectionError)


def _net_error(
    name: str, exc: BaseException, spec: HfSpec | None = None, deadline: Deadline | None = None
) -> SourceError:
    """The one-line SourceError for a network error, typed Unreachable when no server answered."""
    if deadline is not None and deadline.passed():
        # the deadline's watchdog (or the last timeout it cut short) ended the read: say that
        return deadline.error(name)
    kind = Unreachable if isinstance(exc, _UNREACHABLE) else SourceError
    return kind(f"{name}: {_describe(exc, spec, deadline)}")


def _total_from_content_range(value: str | None) -> int | None:
    """The N of ``bytes a-b/N`` or ``bytes */N``; None when absent or ``*``."""
    m = re.fullmatch(r"bytes\s+(?:\*|\d+-\d+)/(\d+)", (value or "").strip())
    return int(m[1]) if m else None


class HttpSource:
    """A file on an HTTP server, read with one bounded ``Range: bytes=a-b`` GET per ``read_at``.

    ``head`` holds the first bytes, fetched by the request that opened the file (its answer also
    gave size, etag and commit: no separate HEAD). All requests share one ``Deadline``.
    """

    costly_reads = True  # each read is a round trip: gguf_header sizes them with readahead.next_read

    def __init__(
        self,
        name: str,
        url: str,
        headers: dict[str, str],
        *,
        size: int | None = None,
        etag: str | None = None,
        commit: str | None = None,
        head: bytes = b"",
        deadline: Deadline | None = None,
    ) -> None:
        self.name = name
        self.url = url  # after redirects: for LFS files on the Hub a signed CDN URL
        self.size = size
        self.etag = etag
        self.commit = commit  # X-Repo-Commit for hf:// specs
        self.bytes_fetched = len(head)
        self.owns_deadline = deadline is None  # open_remote sets it when it made the deadline for this file
        self.deadline = deadline or Deadline()
        self._head = head
        self._headers = headers

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0:
            raise ValueError(f"bad read: offset={offset} n={n}")
        out = bytearray(self._head[offset : offset + n]) if offset < len(self._head) else bytearray()
        # A server may send less than asked (RFC 9110 allows it): keep asking until n or EOF.
        while len(out) < n:
            pos = offset + len(out)
            if self.size is not None and pos >= self.size:
                break
            chunk = self._get(pos, n - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def _get(self, start: int, n: int) -> bytes:
        end = start + n - 1 if self.size is None else min(start + n, self.size) - 1
        headers = {**self._headers, "Range": f"bytes={start}-{end}"}
        try:
            with _stream(self.name, self.url, headers, self.deadline, follow_redirects=True) as r:
                if r.status_code == 416:
                    total = self._learn_size(r.headers.get("Content-Range"))
                    if total is not None and start >= total:
                        return b""  # read past the end: EOF, not an error
                    raise SourceError(f"{self.name}: range {start}-{end} not satisfiable (HTTP 416)")
                _expect_partial(self.name, r)
                content_range = r.headers.get("Content-Range", "")
                if not re.match(rf"bytes\s+{start}-", content_range):
                    raise SourceError(f"{self.name}: server answered range {content_range!r}, not bytes={start}-{end}")
                self._learn_size(content_range)
                data = _receive(self.name, r, end - start + 1, self.deadline)
                self.bytes_fetched += len(data)
                return data
        except SourceError:
            raise
        except _NET_ERRORS as exc:
            raise _net_error(self.name, exc, deadline=self.deadline) from None

    def _learn_size(self, content_range: str | None) -> int | None:
        total = _total_from_content_range(content_range)
        if total is not None and self.size is not None and total != self.size:
            # Bytes from two versions of a file would parse as garbage: stop instead.
            raise SourceError(f"{self.name}: the file changed on the server (size {self.size}, now {total})")
        if total is not None:
            self.size = total
        return total

    def close(self) -> None:
        if self.owns_deadline:  # its connections end with it; a shared deadline's owner closes that
            self.deadline.close()

    def __enter__(self) -> HttpSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def _stream(
    name: str, url: str, headers: dict[str, str], deadline: Deadline, *, follow_redirects: bool
) -> Iterator[httpx2.Response]:
    """GET ``url`` through the deadline's client as a stream, waiting for the answer no longer than the deadline.

    Timeouts bound each socket read, so a server dribbling its status line and headers a byte at a
    time never trips them. So the request is sent from a helper thread that the deadline can walk
    away from; when it passes, the deadline's watchdog shuts the socket that thread waits on, so it
    ends too, and it closes the answer should one still arrive. (The body is read here: ``_receive``.)
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


def _expect_partial(name: str, r: httpx2.Response) -> None:
    """Raise unless ``r`` is a 206; its body is read only when it is a small error answer."""
    if r.status_code == 206:
        return
    if r.status_code == 200:
        # Leaving the caller's block closes the connection before the body is read.
        raise SourceError(f"{name}: server ignored the Range request; refusing to download the whole file")
    _raise_for_error(r)
    raise SourceError(f"{name}: unexpected HTTP {r.status_code} to a Range request")


def _raise_for_error(r: httpx2.Response) -> None:
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


def _receive(name: str, r: httpx2.Response, want: int, deadline: Deadline) -> bytes:
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


def open_remote(spec: str, *, deadline: Deadline | None = None) -> HttpSource:
    """Open an ``hf://`` spec or ``http(s)://`` URL with one GET of its first bytes (size, etag, commit from the
    answer)."""
    if not spec.startswith(("hf://", "http://", "https://")):
        raise SourceError(f"{spec}: not an hf:// or http(s):// spec")
    own = deadline is None  # then this file's reads have a deadline of their own, which it closes
    deadline = deadline or Deadline()
    src = None
    try:
        src = _open_hf(spec, deadline) if spec.startswith("hf://") else _open_url(spec, deadline)
        src.owns_deadline = own
        return src
    finally:
        if own and src is None:  # not opened: its connections end here
            deadline.close()


@dataclass
class _FirstAnswer:
    url: str  # where the bytes came from (the CDN for LFS files)
    headers: dict[str, str]  # to send there (no token once the chain left the first origin)
    data: bytes
    size: int | None
    etag: str | None
    commit: str | None
    on_first_origin: bool


def _first_read(
    name: str, url: str, headers: dict[str, str], deadline: Deadline, s: HfSpec | None = None
) -> _FirstAnswer:
    """GET the first ``FIRST_READ`` bytes, following redirects by hand as huggingface_hub does for HEAD.

    Redirects that stay on the origin (renamed repositories) keep the token; the first that leaves it
    (the Hub's CDN) drops it. Metadata comes from the Hub's answers on the way (X-Repo-Commit,
    X-Linked-Etag, X-Linked-Size), else from the 206 itself.
    """
    headers = {**headers, "Accept-Encoding": "identity"}  # a compressed body would not be the bytes asked for
    first_origin, size, etag, commit = _origin(url), None, None, None
    try:
        for _ in range(MAX_REDIRECTS):
            ask = {**headers, "Range": f"bytes=0-{FIRST_READ - 1}"}
            with _stream(name, url, ask, deadline, follow_redirects=False) as r:
                commit = r.headers.get(constants.HUGGINGFACE_HEADER_X_REPO_COMMIT) or commit
                etag = _etag(r.headers.get(constants.HUGGINGFACE_HEADER_X_LINKED_ETAG)) or etag
                linked = r.headers.get(constants.HUGGINGFACE_HEADER_X_LINKED_SIZE, "")
                size = int(linked) if linked.isdigit() else size
                if r.is_redirect and r.headers.get("Location"):
                    target = urljoin(url, r.headers["Location"])
                    if _origin(target) != _origin(url):
                        headers.pop("authorization", None)  # never send the token off the Hub, as huggingface_hub does
                        headers.pop("Authorization", None)
                    url = target
                    continue
                if r.status_code == 416:  # an empty file: there is no byte 0
                    total = _total_from_content_range(r.headers.get("Content-Range"))
                    if total != 0:
                        raise SourceError(f"{name}: range 0-{FIRST_READ - 1} not satisfiable (HTTP 416)")
                    data = b""
                else:
                    _expect_partial(name, r)
                    content_range = r.headers.get("Content-Range", "")
                    if not re.match(r"bytes\s+0-", content_range):
                        raise SourceError(f"{name}: server answered range {content_range!r}, not bytes=0-")
                    total = _total_from_content_range(content_range)
                    data = _receive(name, r, FIRST_READ, deadline)
                if size is not None and total is not None and total != size:
                    raise SourceError(f"{name}: the file changed on the server (size {size}, now {total})")
                return _FirstAnswer(
                    url,
                    headers,
                    data,
                    total if total is not None else size,
                    etag or _etag(r.headers.get("ETag")),
                    commit,
                    _origin(url) == first_origin,
                )
        raise SourceError(f"{name}: more than {MAX_REDIRECTS} redirects")
    except SourceError:
        raise
    except _NET_ERRORS as exc:
        raise _net_error(name, exc, s, deadline) from None


def _etag(value: str | None) -> str | None:
    return value.removeprefix("W/").strip('"') if value else None


def _open_hf(spec: str, deadline: Deadline) -> HttpSource:
    s = parse_hf_spec(spec)
    endpoint, token = _endpoint(), _token()
    url = hf_hub_url(s.repo_id, s.path, revision=s.revision, endpoint=endpoint)
    a = _first_read(spec, url, build_hf_headers(token=token), deadline, s)
    if a.commit is None:
        raise SourceError(f"{spec}: {endpoint} does not answer like a Hugging Face Hub (no X-Repo-Commit)")
    location = a.url
    if a.on_first_origin and s.revision != a.commit:
        # Served by the Hub itself (a small git file): pin later reads to the commit so they match size and etag.
        location = hf_hub_url(s.repo_id, s.path, revision=a.commit, endpoint=endpoint)
    return HttpSource(
        spec, location, a.headers, size=a.size, etag=a.etag, commit=a.commit, head=a.data, deadline=deadline
    )


def _open_url(url: str, deadline: Deadline) -> HttpSource:
    headers: dict[str, str] = {}
    if _origin(url) == _origin(_endpoint()):
        headers = build_hf_headers(token=_token())  # a resolve URL on the Hub itself
    a = _first_read(url, url, headers, deadline)
    return HttpSource(url, a.url, a.headers, size=a.size, etag=a.etag, commit=a.commit, head=a.data, deadline=deadline)


def _hub_api(name: str, path: str, params: dict[str, Any], spec: HfSpec | None = None) -> Any:
    """GET ``ENDPOINT/api/PATH`` and decode its JSON, as huggingface_hub's HfApi would, but through a deadline
    (SPECREG_HEADER_DEADLINE_SECONDS, within the job's): its watchdog ends the request on time however slowly
    the Hub answers, where HfApi's shared client has only a timeout per socket read."""
    return _hub_api_url(name, str(httpx2.URL(f"{_endpoint()}/api/{path}", params=params)), spec)[0]


def _hub_api_url(name: str, url: str, spec: HfSpec | None = None) -> tuple[Any, httpx2.Headers]:
    """_hub_api for a whole URL (a listing's next page): the decoded JSON and the answer's headers."""
    seconds = header_deadline_seconds()
    reason = f"the Hub did not answer within {seconds:g} s (SPECREG_HEADER_DEADLINE_SECONDS)"
    with Deadline(seconds, reason=reason) as deadline:
        try:
            with _stream(name, url, build_hf_headers(token=_token()), deadline, follow_redirects=True) as r:
                _raise_for_error(r)
                if r.status_code != 200:
                    raise SourceError(f"{name}: unexpected HTTP {r.status_code} from the Hub's API")
                body = _receive(name, r, MAX_API_BODY + 1, deadline)
                headers = r.headers
            if len(body) > MAX_API_BODY:
                raise SourceError(f"{name}: the Hub's answer is larger than {MAX_API_BODY >> 20} MiB")
            try:
                return json.loads(body), headers
            except ValueError:
                raise SourceError(f"{name}: the Hub's answer is not JSON") from None
        except SourceError:
            raise
        except _NET_ERRORS as exc:
            raise _net_error(name, exc, spec, deadline) from None


def _model_info(name: str, data: Any) -> ModelInfo:
    """The JSON as HfApi turns it into a ModelInfo (its ``__init__`` takes untyped ``**kwargs``)."""
    try:
        return ModelInfo(**data)  # type: ignore[no-untyped-call]
    except (TypeError, KeyError, AttributeError, ValueError):  # not the Hub's shape (a hostile or broken server)
        raise SourceError(f"{name}: the Hub's answer is not a model's information") from None


def list_gguf_files(repo_id: str, revision: str | None = None, include: str | None = None) -> RepoListing:
    """The ``.gguf`` files of a model repository (optionally matching the glob ``include``), with sizes."""
    name = hf_source(repo_id, revision, "").rstrip("/")
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise SourceError(f"{name}: invalid repository id {repo_id!r}") from None
    spec = HfSpec(repo_id, revision, "")
    # What HfApi.model_info(files_metadata=True) asks.
    path = f"models/{repo_id}" + ("" if revision is None else f"/revision/{quote(revision, safe='')}")
    info = _model_info(name, _hub_api(name, path, {"blobs": True}, spec))
    gated = bool(info.gated)  # the Hub says False, "auto" or "manual"
    files = [
        RemoteFile(
            path=s.rfilename,
            size=s.lfs.size if s.lfs else s.size,
            etag=s.lfs.sha256 if s.lfs else s.blob_id,
            gated=gated,
        )
        for s in info.siblings or []
        if s.rfilename.lower().endswith(".gguf") and (include is None or fnmatch.fnmatch(s.rfilename, include))
    ]
    return RepoListing(repo_id, info.sha, sorted(files, key=lambda f: f.path), _card_base_models(info))


def _card_base_models(info: ModelInfo) -> list[str]:
    """``base_model`` of the repository's card: one name or a list (a merge names several)."""
    card = info.card_data
    value = card.get("base_model") if card is not None else None
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [n for n in names if isinstance(n, str)][:20]


def _base_models(tags: list[str]) -> list[str]:
    """Base models named by ``base_model:X`` / ``base_model:quantized:X`` tags, in order, once each."""
    out: list[str] = []
    for tag in tags:
        if not tag.startswith("base_model:"):
            continue
        rest = tag.removeprefix("base_model:")
        kind, _, target = rest.partition(":")
        model = target if target and kind in ("quantized", "finetune", "adapter", "merge") else rest
        if model not in out:
            out.append(model)
    return out


def search_models(*, limit: int = 100, **kwargs: Any) -> list[dict[str, Any]]:
    """The Hub's model search (``HfApi.list_models``'s query parameters: search, filter, author, sort) as plain
    dicts (id, tags, downloads, gguf, base_models, gated); one request, so ``limit`` is at most the Hub's page
    (1,000), and a limit always: without one the search would page through the whole Hub."""
    name = f"{_endpoint()}: model search failed"
    params = {k: v for k, v in {**kwargs, "limit": limit}.items() if v is not None}
    return _found_models(name, _hub_api(name, "models", params), limit)


HUB_PAGE = 1000  # the most models the Hub's listing answers per page


@dataclass
class ModelPage:
    models: list[dict[str, Any]]  # as search_models gives them
    next_url: str | None  # the Hub's next page (its Link header, a cursor), or None after the last


def list_models_page(next_url: str | None = None, **kwargs: Any) -> ModelPage:
    """One page of the Hub's model listing (``HfApi.list_models``'s parameters), and where the next one is.

    huggingface_hub pages by the ``Link: <...>; rel="next"`` header (utils/_pagination.py); so do we, one page
    per call, so that a crawl can keep the cursor and go on from it after a restart. A next link is followed
    only on the Hub's own origin: a listing must not send the token anywhere else."""
    name = f"{_endpoint()}: model listing failed"
    if next_url is None:
        params = {k: v for k, v in {**kwargs, "limit": HUB_PAGE}.items() if v is not None}
        next_url = str(httpx2.URL(f"{_endpoint()}/api/models", params=params))
    else:
        _same_origin(name, next_url)
    data, headers = _hub_api_url(name, next_url)
    following = None
    for link in httpx2.Response(200, headers={"Link": headers.get("Link", "")}).links.values():
        if link.get("rel") == "next" and link.get("url"):
            try:
                following = urljoin(next_url, link["url"])
            except ValueError as exc:  # "http://[evil/…": an IPv6 bracket never closed
                raise SourceError(f"{name}: its next page {_no_address(link['url'], exc)}") from None
    if following is not None:
        _same_origin(name, following)
    return ModelPage(_found_models(name, data), following)


def _same_origin(name: str, url: str) -> None:
    """SourceError unless ``url`` is on the Hub's own origin: a listing must not send the token anywhere else."""
    try:
        origin = _origin(url)
    except ValueError as exc:  # "http://host:+19151/…": urlsplit reads it, .port raises
        raise SourceError(f"{name}: its next page {_no_address(url, exc)}") from None
    if origin != _origin(_endpoint()):
        raise SourceError(f"{name}: a next page on another host ({origin[1]}) is not followed")


def _no_address(url: str, exc: ValueError) -> str:
    return f"{url[:200]!r} is no address ({str(exc)[:200]})"


def _found_models(name: str, found: Any, limit: int = HUB_PAGE) -> list[dict[str, Any]]:
    if not isinstance(found, list):
        raise SourceError(f"{name}: the Hub's answer is not a list of models")
    results = []
    for item in found[:limit]:  # a server that answers more than it was asked for is cut, not parsed
        m = _model_info(name, {"siblings": None, **item} if isinstance(item, dict) else item)
        tags = list(m.tags or [])
        results.append(
            {
                "id": m.id,
                "tags": tags,
                "downloads": m.downloads,
                "gguf": "gguf" in tags or bool(getattr(m, "gguf", None)),
                "base_models": _base_models(tags),
                "gated": bool(m.gated),
            }
        )
    return results
