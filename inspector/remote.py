"""GGUF files on the Hugging Face Hub (``hf://OWNER/REPO[@REV]/PATH``) or any HTTP server, read by Range requests."""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urljoin, urlsplit

import httpx2
from huggingface_hub import HfApi, constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status, validate_repo_id

from .sources import SourceError

# huggingface_hub's shared client has no timeout at all; a dead host must fail fast, a slow CDN may take a while.
TIMEOUT = httpx2.Timeout(30.0, connect=10.0)

# What follows '@': PR and conversion refs contain '/', so they are matched before a plain name (as HfFileSystem does).
_HF_SPEC = re.compile(
    r"hf://(?P<repo>[^/@]+/[^/@]+)(?:@(?P<rev>refs/pr/\d+|refs/convert/[\w.-]+|[^/]+))?(?:/(?P<path>.*))?", re.S
)
_NON_MODEL_PREFIXES = ("datasets", "spaces", "buckets", "kernels")


@dataclass(frozen=True)
class HfSpec:
    repo_id: str
    revision: str | None  # None means the Hub's default branch
    path: str

    def __str__(self) -> str:
        rev = f"@{quote(self.revision, safe='')}" if self.revision else ""  # encoded: a branch may hold '/'
        return f"hf://{self.repo_id}{rev}/{self.path}"


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

    def spec(self, path: str) -> str:
        """The hf:// spec of ``path`` pinned to the listed commit, so later reads see the same bytes."""
        rev = f"@{self.commit}" if self.commit else ""
        return f"hf://{self.repo_id}{rev}/{path}"


def _endpoint() -> str:
    # huggingface_hub froze HF_ENDPOINT into constants.ENDPOINT at import; read it again at call time.
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _token() -> str | None:
    # Explicit so HF_TOKEN is sent even where implicit tokens are disabled; None falls back to `hf auth login`.
    return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


def _api() -> HfApi:
    return HfApi(endpoint=_endpoint(), token=_token())


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
    if repo_id.split("/")[0] in _NON_MODEL_PREFIXES:
        raise SourceError(f"{spec}: only model repositories are supported")
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise SourceError(f"{spec}: invalid repository id {repo_id!r}") from None
    if not path:
        raise SourceError(f"{spec}: missing the file path after the repository (hf://OWNER/REPO/PATH)")
    if path.startswith("/"):
        raise SourceError(f"{spec}: the path in the repository must be relative")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise SourceError(f"{spec}: the path may not contain '..', '.' or empty components")
    revision = unquote(m["rev"]) if m["rev"] else None
    return HfSpec(repo_id, revision, path)


def _describe(exc: BaseException, spec: HfSpec | None = None) -> str:
    """One line for a network or Hub error; huggingface_hub's own messages run to several lines."""
    repo = spec.repo_id if spec else "the repository"
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


# Errors that mean "the network or the server said no", as opposed to bugs; ValueError covers bad JSON answers.
_NET_ERRORS = (OSError, httpx2.HTTPError, ValueError)


def _total_from_content_range(value: str | None) -> int | None:
    """The N of ``bytes a-b/N`` or ``bytes */N``; None when absent or ``*``."""
    m = re.fullmatch(r"bytes\s+(?:\*|\d+-\d+)/(\d+)", (value or "").strip())
    return int(m[1]) if m else None


class HttpSource:
    """A file on an HTTP server, read with one ``Range: bytes=a-b`` GET per ``read_at``."""

    def __init__(self, name: str, url: str, headers: dict[str, str], *, size: int | None = None,
                 etag: str | None = None, commit: str | None = None) -> None:
        self.name = name
        self.url = url  # after redirects: for LFS files on the Hub a signed CDN URL
        self.size = size
        self.etag = etag
        self.commit = commit  # X-Repo-Commit for hf:// specs
        self.bytes_fetched = 0
        self._headers = headers

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0:
            raise ValueError(f"bad read: offset={offset} n={n}")
        out = bytearray()
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
            with get_session().stream("GET", self.url, headers=headers, timeout=TIMEOUT,
                                      follow_redirects=True) as r:
                if r.status_code == 200:
                    # Leaving the block closes the connection before the body is read.
                    raise SourceError(f"{self.name}: server ignored the Range request; "
                                      "refusing to download the whole file")
                if r.status_code == 416:
                    total = self._learn_size(r.headers.get("Content-Range"))
                    if total is not None and start >= total:
                        return b""  # read past the end: EOF, not an error
                    raise SourceError(f"{self.name}: range {start}-{end} not satisfiable (HTTP 416)")
                if r.status_code != 206:
                    hf_raise_for_status(r)
                    raise SourceError(f"{self.name}: unexpected HTTP {r.status_code} to a Range request")
                content_range = r.headers.get("Content-Range", "")
                if not re.match(rf"bytes\s+{start}-", content_range):
                    raise SourceError(f"{self.name}: server answered range {content_range!r}, "
                                      f"not bytes={start}-{end}")
                self._learn_size(content_range)
                want = end - start + 1
                data = bytearray()
                for chunk in r.iter_bytes():
                    data += chunk
                    if len(data) >= want:
                        break
                self.bytes_fetched += len(data)
                return bytes(data[:want])
        except SourceError:
            raise
        except _NET_ERRORS as exc:
            raise SourceError(f"{self.name}: {_describe(exc)}") from None

    def _learn_size(self, content_range: str | None) -> int | None:
        total = _total_from_content_range(content_range)
        if total is not None and self.size is not None and total != self.size:
            # Bytes from two versions of a file would parse as garbage: stop instead.
            raise SourceError(f"{self.name}: the file changed on the server (size {self.size}, now {total})")
        if total is not None:
            self.size = total
        return total

    def close(self) -> None:
        pass  # the connection pool belongs to huggingface_hub's shared session

    def __enter__(self) -> HttpSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_remote(spec: str) -> HttpSource:
    """Resolve an ``hf://`` spec (size, etag, commit, CDN URL) or HEAD an ``http(s)://`` URL."""
    if spec.startswith("hf://"):
        return _open_hf(spec)
    if spec.startswith(("http://", "https://")):
        return _open_url(spec)
    raise SourceError(f"{spec}: not an hf:// or http(s):// spec")


def _open_hf(spec: str) -> HttpSource:
    s = parse_hf_spec(spec)
    endpoint, token = _endpoint(), _token()
    url = hf_hub_url(s.repo_id, s.path, revision=s.revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(url, token=token, timeout=TIMEOUT, endpoint=endpoint)
    except _NET_ERRORS as exc:
        raise SourceError(f"{spec}: {_describe(exc, s)}") from None
    if meta.commit_hash is None:
        raise SourceError(f"{spec}: {endpoint} does not answer like a Hugging Face Hub (no X-Repo-Commit)")
    location = urljoin(url, meta.location)
    if location == url:
        # Not redirected (a small git file): pin reads to the commit so they match size and etag.
        location = hf_hub_url(s.repo_id, s.path, revision=meta.commit_hash, endpoint=endpoint)
    headers = build_hf_headers(token=token)
    headers["Accept-Encoding"] = "identity"  # a compressed body would not be the bytes asked for
    if _origin(location) != _origin(url):
        headers.pop("authorization", None)  # never send the token to the CDN, as huggingface_hub does
    return HttpSource(spec, location, headers, size=meta.size, etag=meta.etag, commit=meta.commit_hash)


def _open_url(url: str) -> HttpSource:
    headers = {"Accept-Encoding": "identity"}
    if _origin(url) == _origin(_endpoint()):
        headers = build_hf_headers(token=_token(), headers=headers)  # a resolve URL on the Hub itself
    try:
        r = get_session().head(url, headers=headers, timeout=TIMEOUT, follow_redirects=True)
        if r.status_code == 405:  # HEAD not allowed: the first Range answer gives the size
            return HttpSource(url, url, headers)
        hf_raise_for_status(r)
    except _NET_ERRORS as exc:
        raise SourceError(f"{url}: {_describe(exc)}") from None
    final = str(r.url)
    if _origin(final) != _origin(url):
        headers.pop("authorization", None)
    length = r.headers.get("Content-Length")
    etag = r.headers.get("X-Linked-Etag") or r.headers.get("ETag")
    return HttpSource(url, final, headers, size=int(length) if length and length.isdigit() else None,
                      etag=etag.removeprefix("W/").strip('"') if etag else None,
                      commit=r.headers.get("X-Repo-Commit"))


def list_gguf_files(repo_id: str, revision: str | None = None, include: str | None = None) -> RepoListing:
    """The ``.gguf`` files of a model repository (optionally matching the glob ``include``), with sizes."""
    name = f"hf://{repo_id}" + (f"@{revision}" if revision else "")
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise SourceError(f"{name}: invalid repository id {repo_id!r}") from None
    spec = HfSpec(repo_id, revision, "")
    try:
        info = _api().model_info(repo_id, revision=revision, files_metadata=True, timeout=30)
    except _NET_ERRORS as exc:
        raise SourceError(f"{name}: {_describe(exc, spec)}") from None
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
    return RepoListing(repo_id, info.sha, sorted(files, key=lambda f: f.path))


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


def search_models(*, limit: int = 100, **kwargs: object) -> list[dict]:
    """``HfApi.list_models(**kwargs)`` as plain dicts (id, tags, downloads, gguf, base_models, gated)."""
    # A limit always: without one list_models pages through the whole Hub.
    try:
        models = list(_api().list_models(limit=limit, **kwargs))
    except _NET_ERRORS as exc:
        raise SourceError(f"{_endpoint()}: model search failed: {_describe(exc)}") from None
    results = []
    for m in models:
        tags = list(m.tags or [])
        results.append({
            "id": m.id,
            "tags": tags,
            "downloads": m.downloads,
            "gguf": "gguf" in tags or bool(getattr(m, "gguf", None)),
            "base_models": _base_models(tags),
            "gated": bool(m.gated),
        })
    return results
