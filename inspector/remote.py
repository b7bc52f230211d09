"""GGUF files on the Hugging Face Hub (``hf://OWNER/REPO[@REV]/PATH``) or any HTTP server, read by Range requests.

The request plumbing is inspector.hub_http, deadlines inspector.deadlines, hf:// parsing inspector.hf_spec and
the Hub's API inspector.hub_api."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx2
from huggingface_hub import constants, hf_hub_url
from huggingface_hub.utils import build_hf_headers

from .deadlines import Deadline
from .errors import SourceError
from .hf_spec import HfSpec, hub_endpoint, parse_hf_spec
from .hub_http import (
    MAX_REDIRECTS,
    NET_ERRORS,
    net_error,
    raise_for_error,
    receive,
    request_token,
    stream_request,
    url_origin,
)
from .readahead import FIRST_READ


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
            with stream_request(self.name, self.url, headers, self.deadline, follow_redirects=True) as r:
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
                data = receive(self.name, r, end - start + 1, self.deadline)
                self.bytes_fetched += len(data)
                return data
        except SourceError:
            raise
        except NET_ERRORS as exc:
            raise net_error(self.name, exc, deadline=self.deadline) from None

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


def _expect_partial(name: str, r: httpx2.Response) -> None:
    """Raise unless ``r`` is a 206; its body is read only when it is a small error answer."""
    if r.status_code == 206:
        return
    if r.status_code == 200:
        # Leaving the caller's block closes the connection before the body is read.
        raise SourceError(f"{name}: server ignored the Range request; refusing to download the whole file")
    raise_for_error(r)
    raise SourceError(f"{name}: unexpected HTTP {r.status_code} to a Range request")


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
    first_origin, size, etag, commit = url_origin(url), None, None, None
    try:
        for _ in range(MAX_REDIRECTS):
            ask = {**headers, "Range": f"bytes=0-{FIRST_READ - 1}"}
            with stream_request(name, url, ask, deadline, follow_redirects=False) as r:
                commit = r.headers.get(constants.HUGGINGFACE_HEADER_X_REPO_COMMIT) or commit
                etag = _etag(r.headers.get(constants.HUGGINGFACE_HEADER_X_LINKED_ETAG)) or etag
                linked = r.headers.get(constants.HUGGINGFACE_HEADER_X_LINKED_SIZE, "")
                size = int(linked) if linked.isdigit() else size
                if r.is_redirect and r.headers.get("Location"):
                    target = urljoin(url, r.headers["Location"])
                    if url_origin(target) != url_origin(url):
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
                    data = receive(name, r, FIRST_READ, deadline)
                if size is not None and total is not None and total != size:
                    raise SourceError(f"{name}: the file changed on the server (size {size}, now {total})")
                return _FirstAnswer(
                    url,
                    headers,
                    data,
                    total if total is not None else size,
                    etag or _etag(r.headers.get("ETag")),
                    commit,
                    url_origin(url) == first_origin,
                )
        raise SourceError(f"{name}: more than {MAX_REDIRECTS} redirects")
    except SourceError:
        raise
    except NET_ERRORS as exc:
        raise net_error(name, exc, s, deadline) from None


def _etag(value: str | None) -> str | None:
    return value.removeprefix("W/").strip('"') if value else None


def _open_hf(spec: str, deadline: Deadline) -> HttpSource:
    s = parse_hf_spec(spec)
    endpoint, token = hub_endpoint(), request_token()
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
    if url_origin(url) == url_origin(hub_endpoint()):
        headers = build_hf_headers(token=request_token())  # a resolve URL on the Hub itself
    a = _first_read(url, url, headers, deadline)
    return HttpSource(url, a.url, a.headers, size=a.size, etag=a.etag, commit=a.commit, head=a.data, deadline=deadline)
