"""Checking on the web: two named sources (registered or hf://), or a browser-sent header against the registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from inspector.alone import target_alone
from inspector.compat import PairCheck, check_pair
from inspector.info import InspectError, InspectTimeout, ModelInfo, inspect_source, shared_deadline
from registry.access.policy import header_cap, hub_reads_for, may_see_paths
from registry.catalog.pairing import candidate_files, info_is_target
from registry.catalog.stored import load_info, types_for
from registry.models import GGUFFile

if TYPE_CHECKING:
    from inspector.deadlines import Deadline


class CheckError(Exception):
    """A source cannot be read; one line."""


class CheckTimeout(CheckError):
    """The Hub reads ran past SPECREG_HEADER_DEADLINE_SECONDS; one line (the web answers 504)."""


def info_for(source: str, cap: int | None = None, deadline: Deadline | None = None) -> ModelInfo:
    source = source.strip()
    if not source:
        raise CheckError("name two files: a registered source or hf://OWNER/REPO[@REVISION]/PATH")
    f = GGUFFile.objects.select_related("token_table").filter(source=source).first()
    if f is not None:
        info = load_info(f)
        info.token_types = types_for(f)  # whether adapt_draft could reconcile a near-miss depends on them
        return info
    if not source.startswith("hf://"):
        # The server never opens paths or URLs given on a web form: that would read its own disk or network.
        raise CheckError(
            f"{source}: not a registered file; the web form reads registered files and "
            "hf://OWNER/REPO[@REVISION]/PATH files (for a file on your computer, use “Local file”)"
        )
    try:
        return inspect_source(source, cap or settings.SPECREG_MAX_HEADER_BYTES, deadline=deadline)
    except InspectTimeout as exc:
        raise CheckTimeout(str(exc)) from None
    except InspectError as exc:
        raise CheckError(str(exc)) from None


PATH_REFUSED = (
    "name a registered file by its file name, as the pages show it, or a Hub file as "
    "hf://OWNER/REPO[@REVISION]/PATH; server paths are not taken from visitors who are not signed in"
)


def visitor_source(source: str, user=None) -> str:
    """The source a visitor who may not see server paths means: hf:// specs as given, and registered local
    files by their file name only.

    A full path is refused with one message whether or not it is registered, and without echoing it:
    answering differently for a registered path (or rewriting its folder in an echo) would tell a
    stranger which server paths exist."""
    source = source.strip()
    if may_see_paths(user) or not source or source.startswith("hf://"):
        return source
    if "/" in source or "\\" in source:
        raise CheckError(PATH_REFUSED)
    matches = list(
        GGUFFile.objects.exclude(source__startswith="hf://")
        .filter(source__endswith="/" + source)
        .values_list("source", flat=True)[:2]
    )
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise CheckError(f"{source}: several registered files have this name; sign in to name one by its path")
    raise CheckError(f"{source}: no registered file has this name ({PATH_REFUSED})")


def check_sources(target: str, draft: str, user=None) -> tuple[PairCheck, ModelInfo, ModelInfo]:
    """Check two sources for ``user``: Hub files read with the server's token and its full header cap
    only for a user allowed to use them (registry.access.policy)."""
    target, draft = visitor_source(target, user), visitor_source(draft, user)
    # One deadline for both files (and every shard): the request or job ends within it, not twice it.
    with hub_reads_for(user), shared_deadline(target, draft) as deadline:
        cap = header_cap(user)
        t, d = info_for(target, cap, deadline), info_for(draft, cap, deadline)
    return check_pair(t, d), t, d


def check_alone(target: str, user=None) -> dict[str, Any]:
    """What ``target`` can use with no second model, read for ``user`` as ``check_sources`` reads:
    ``check_pair TARGET --json``'s answer (inspector.alone)."""
    target = visitor_source(target, user)
    with hub_reads_for(user), shared_deadline(target) as deadline:
        t = info_for(target, header_cap(user), deadline)
    return target_alone(t)


def local_partners(info: ModelInfo, limit: int = 50) -> list:
    """Registered files the local one could pair with, checked exactly (nothing is stored)."""
    tok = info.tokenizer
    if tok is None:
        return []
    qs = candidate_files(tok.vocab_type, tok.n_tokens, tok.vocab_key)
    out = []
    for f in qs.select_related("token_table", "model__base").defer("token_table__blob")[:limit]:
        other = load_info(f)
        local_is_target = info_is_target(info, f)
        result = check_pair(info, other) if local_is_target else check_pair(other, info)
        out.append((f, "draft" if local_is_target else "target", result))
    return sorted(out, key=lambda x: (not x[2].compatible, x[0].source))
