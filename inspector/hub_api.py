"""The Hub's API through a deadline: a repository's GGUF files, model searches and the listing's pages."""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin

import httpx2
from huggingface_hub import constants, hf_hub_url
from huggingface_hub.errors import (
    HFValidationError,
)
from huggingface_hub.hf_api import ModelInfo
from huggingface_hub.utils import build_hf_headers, validate_repo_id

from .deadlines import Deadline, header_deadline_seconds
from .errors import SourceError
from .hf_spec import HfSpec, hub_endpoint
from .hub_http import (
    MAX_REDIRECTS,
    NET_ERRORS,
    net_error,
    no_address,
    raise_for_error,
    receive,
    request_token,
    same_origin,
    stream_request,
    url_origin,
)
from .hub_names import hf_source, shard_names

MAX_API_BODY = 64 << 20  # of a Hub API answer (a listing of thousands of files is a few MB)


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


def _hub_api(name: str, path: str, params: dict[str, Any], spec: HfSpec | None = None) -> Any:
    """GET ``ENDPOINT/api/PATH`` and decode its JSON, as huggingface_hub's HfApi would, but through a deadline
    (SPECREG_HEADER_DEADLINE_SECONDS, within the job's): its watchdog ends the request on time however slowly
    the Hub answers, where HfApi's shared client has only a timeout per socket read."""
    return _hub_api_url(name, str(httpx2.URL(f"{hub_endpoint()}/api/{path}", params=params)), spec)[0]


def _hub_api_url(name: str, url: str, spec: HfSpec | None = None) -> tuple[Any, httpx2.Headers]:
    """_hub_api for a whole URL (a listing's next page): the decoded JSON and the answer's headers."""
    seconds = header_deadline_seconds()
    reason = f"the Hub did not answer within {seconds:g} s (SPECREG_HEADER_DEADLINE_SECONDS)"
    with Deadline(seconds, reason=reason) as deadline:
        try:
            with stream_request(
                name, url, build_hf_headers(token=request_token()), deadline, follow_redirects=True
            ) as r:
                raise_for_error(r)
                if r.status_code != 200:
                    raise SourceError(f"{name}: unexpected HTTP {r.status_code} from the Hub's API")
                body = receive(name, r, MAX_API_BODY + 1, deadline)
                headers = r.headers
            if len(body) > MAX_API_BODY:
                raise SourceError(f"{name}: the Hub's answer is larger than {MAX_API_BODY >> 20} MiB")
            try:
                return json.loads(body), headers
            except ValueError:
                raise SourceError(f"{name}: the Hub's answer is not JSON") from None
        except SourceError:
            raise
        except NET_ERRORS as exc:
            raise net_error(name, exc, spec, deadline) from None


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


def gguf_file(repo_id: str, revision: str | None, path: str) -> RepoListing:
    """One ``.gguf`` file of a model repository (a split file named by its first shard: all its shards) as a listing
    of that file alone, without listing the repository: its commit, gating and card from one API answer limited to
    those fields, each file's size and etag from the Hub's answer to a one-byte Range request at that commit (the
    etag a listing gives: the LFS sha256, else the git blob id)."""
    name = hf_source(repo_id, revision, path)
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise SourceError(f"{name}: invalid repository id {repo_id!r}") from None
    spec = HfSpec(repo_id, revision, path)
    api_path = f"models/{repo_id}" + ("" if revision is None else f"/revision/{quote(revision, safe='')}")
    info = _model_info(name, _hub_api(name, api_path, {"expand": ["sha", "gated", "cardData"]}, spec))
    gated = bool(info.gated)
    pinned = info.sha or revision
    files = [_file_at(HfSpec(repo_id, pinned, p), gated) for p in shard_names(path)]
    return RepoListing(repo_id, info.sha, files, _card_base_models(info))


def _file_at(spec: HfSpec, gated: bool) -> RemoteFile:
    """The size and etag of one file, from the Hub's headers (an LFS file's X-Linked-Size and X-Linked-Etag on its
    redirect to the CDN, which is not followed) or a small file's own 206 answer."""
    name = hf_source(spec.repo_id, spec.revision, spec.path)
    url = hf_hub_url(spec.repo_id, spec.path, revision=spec.revision, endpoint=hub_endpoint())
    headers = {**build_hf_headers(token=request_token()), "Range": "bytes=0-0", "Accept-Encoding": "identity"}
    seconds = header_deadline_seconds()
    reason = f"the Hub did not answer within {seconds:g} s (SPECREG_HEADER_DEADLINE_SECONDS)"
    with Deadline(seconds, reason=reason) as d:
        try:
            for _ in range(MAX_REDIRECTS):
                with stream_request(name, url, headers, d, follow_redirects=False) as r:
                    raise_for_error(r)
                    linked = r.headers.get(constants.HUGGINGFACE_HEADER_X_LINKED_SIZE, "")
                    etag = _etag(r.headers.get(constants.HUGGINGFACE_HEADER_X_LINKED_ETAG))
                    if etag and linked.isdigit():
                        return RemoteFile(spec.path, int(linked), etag, gated)
                    if r.is_redirect and r.headers.get("Location"):
                        url = urljoin(url, r.headers["Location"])
                        if url_origin(url) != url_origin(hub_endpoint()):  # (the token stays on the Hub)
                            raise SourceError(f"{name}: sent off the Hub without the file's size and etag")
                        continue  # a renamed repository
                    if r.status_code != 206:
                        raise SourceError(f"{name}: unexpected HTTP {r.status_code} to a Range request")
                    total = re.fullmatch(r"bytes\s+\d+-\d+/(\d+)", r.headers.get("Content-Range", "").strip())
                    return RemoteFile(spec.path, int(total[1]) if total else None, _etag(r.headers.get("ETag")), gated)
            raise SourceError(f"{name}: more than {MAX_REDIRECTS} redirects")
        except SourceError:
            raise
        except NET_ERRORS as exc:
            raise net_error(name, exc, spec, d) from None


def _etag(value: str | None) -> str | None:
    return value.removeprefix("W/").strip('"') if value else None


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
    name = f"{hub_endpoint()}: model search failed"
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
    name = f"{hub_endpoint()}: model listing failed"
    if next_url is None:
        params = {k: v for k, v in {**kwargs, "limit": HUB_PAGE}.items() if v is not None}
        next_url = str(httpx2.URL(f"{hub_endpoint()}/api/models", params=params))
    else:
        same_origin(name, next_url)
    data, headers = _hub_api_url(name, next_url)
    following = None
    for link in httpx2.Response(200, headers={"Link": headers.get("Link", "")}).links.values():
        if link.get("rel") == "next" and link.get("url"):
            try:
                following = urljoin(next_url, link["url"])
            except ValueError as exc:  # "http://[evil/…": an IPv6 bracket never closed
                raise SourceError(f"{name}: its next page {no_address(link['url'], exc)}") from None
    if following is not None:
        same_origin(name, following)
    return ModelPage(_found_models(name, data), following)


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
