"""``hf://OWNER/REPO[@REV]/PATH`` sources, and the Hub's endpoint as HF_ENDPOINT names it at call time."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from huggingface_hub import constants
from huggingface_hub.errors import (
    HFValidationError,
)
from huggingface_hub.utils import validate_repo_id

from .errors import SourceError
from .hub_names import NON_MODEL_PREFIXES, hf_source

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


def hub_endpoint() -> str:
    # huggingface_hub froze HF_ENDPOINT into constants.ENDPOINT at import; read it again at call time.
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def hub_host() -> str:
    """The Hub's host (and port) as HF_ENDPOINT names it: what a crawl's limit per host counts."""
    return urlsplit(hub_endpoint()).netloc


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
