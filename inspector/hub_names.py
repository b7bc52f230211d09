"""How the Hugging Face Hub names things, in one place: hf:// sources, split-file shards, repository ids, tokens.

huggingface_hub is imported only inside the functions that need it: reading a local file must not
pay for loading it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import quote

from .errors import SourceError

# Split files as llama.cpp's gguf-split names them: NAME-00001-of-00003.gguf (the width may vary).
SHARD = re.compile(r"(?P<stem>.*)-(?P<part>\d+)-of-(?P<total>\d+)\.gguf")
# The most shards a split file may name. gguf-split writes five digits (99,999 at most) and real
# models use a few dozen; the count comes from a name a visitor types, so it must not decide how many
# names (and requests) one check makes.
MAX_SHARDS = 1024
NON_MODEL_PREFIXES = ("datasets", "spaces", "buckets", "kernels", "api")  # "api": the Hub's API, not an owner
_HUB_URLS = ("hf://", "https://huggingface.co/", "http://huggingface.co/")


def hf_source(repo_id: str, revision: str | None, path: str) -> str:
    """``hf://OWNER/REPO[@REVISION]/PATH``; the revision is percent-encoded (a branch name may hold '/')."""
    rev = f"@{quote(revision, safe='')}" if revision else ""
    return f"hf://{repo_id}{rev}/{path}"


def shard_names(name: str) -> list[str]:
    """All shards of a split file named by its first (``*-00001-of-0000N.gguf``), else ``[name]``.

    SourceError (one line) for a split into more than MAX_SHARDS files.
    """
    m = SHARD.fullmatch(name)
    if m is None or int(m["part"]) != 1 or int(m["total"]) < 1:
        return [name]
    if int(m["total"]) > MAX_SHARDS:
        raise SourceError(f"{name}: a split file of {int(m['total']):,} shards; at most {MAX_SHARDS:,} are read")
    width = len(m["part"])  # llama.cpp writes 5 digits; keep whatever the name uses
    return [f"{m['stem']}-{i:0{width}d}-of-{m['total']}.gguf" for i in range(1, int(m["total"]) + 1)]


def first_shard(path: str) -> str:
    """The first shard's name for any shard of a split file (the path itself otherwise)."""
    m = SHARD.fullmatch(path)
    return f"{m['stem']}-{1:0{len(m['part'])}d}-of-{m['total']}.gguf" if m else path


def shard_glob(path: str) -> str:
    """A glob matching every shard of a split file named by its first shard (the path itself otherwise)."""
    m = SHARD.fullmatch(path)
    return f"{m['stem']}-*-of-{m['total']}.gguf" if m else path


def model_repo_id(text: str) -> str:
    """``OWNER/REPO`` from ``OWNER/REPO``, ``hf://OWNER/REPO`` or a Hub URL; ValueError (one line) otherwise.

    The rule is huggingface_hub's own (``validate_repo_id``), plus: a model repository, not a
    dataset, space or other kind.
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    repo = text.strip()
    for prefix in _HUB_URLS:
        if repo.startswith(prefix):
            repo = repo[len(prefix) :]
    repo = repo.rstrip("/")
    try:
        validate_repo_id(repo)
    except HFValidationError:
        raise ValueError(f"{text!r} is not a model repository name; expected OWNER/REPO") from None
    if repo.count("/") != 1 or repo.split("/")[0] in NON_MODEL_PREFIXES:
        raise ValueError(f"{text!r} is not a model repository name; expected OWNER/REPO")
    return repo


# Set while serving a web visitor who may not use the server's token (anonymous, or signed in without
# the permission): every Hub request made inside sends no token. A context variable rather than a
# parameter because the token is chosen deep down (remote reads, listings, downloads) and one missed
# parameter would be a leak; a new thread starts with the default (token allowed), so work handed to
# threads computes its headers before it starts (remote.py does).
_NO_TOKEN: ContextVar[bool] = ContextVar("specreg_hub_no_token", default=False)


@contextmanager
def hub_access(*, server_token: bool) -> Iterator[None]:
    """Within: Hub requests carry the server's token only when ``server_token`` is true."""
    reset = _NO_TOKEN.set(not server_token)
    try:
        yield
    finally:
        _NO_TOKEN.reset(reset)


def token_withheld() -> bool:
    """Whether Hub requests made now must go without a token (see hub_access)."""
    return _NO_TOKEN.get()


def hub_token(*, anonymous: bool = False) -> bool | str | None:
    """The ``token`` argument for a Hub request: the one choice every Hub request goes through.

    ``False`` (send none at all) for work an anonymous web visitor triggers (``anonymous`` or inside
    ``hub_access(server_token=False)``), so the server's token never reads a private or gated file for
    them. Otherwise ``HF_TOKEN`` given explicitly (so it is sent even where implicit tokens are
    disabled), or ``None``: huggingface_hub then uses the token ``hf auth login`` stored.
    """
    if anonymous or _NO_TOKEN.get():
        return False
    return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


def have_token() -> bool:
    """Whether a Hub request made now would send a token."""
    token = hub_token()
    if token is not None:
        return bool(token)
    from huggingface_hub import get_token

    return bool(get_token())
