"""Checking on the web: two named sources (registered or hf://), or a browser-sent header against the registry."""
from __future__ import annotations

from django.conf import settings

from inspector.compat import PairCheck, check_pair
from inspector.info import InspectError, ModelInfo, inspect_source

from .access import header_cap, hub_reads_for
from .models import GGUFFile
from .pairing import candidate_files, info_is_target
from .stored import load_info


class CheckError(Exception):
    """A source cannot be read; one line."""


def info_for(source: str, cap: int | None = None) -> ModelInfo:
    source = source.strip()
    if not source:
        raise CheckError("name two files: a registered source or hf://OWNER/REPO[@REVISION]/PATH")
    f = GGUFFile.objects.select_related("token_table").filter(source=source).first()
    if f is not None:
        return load_info(f)
    if not source.startswith("hf://"):
        # The server never opens paths or URLs given on a web form: that would read its own disk or network.
        raise CheckError(f"{source}: not a registered file; the web form reads registered files and "
                         "hf://OWNER/REPO[@REVISION]/PATH files (for a file on your computer, use “Local file”)")
    try:
        return inspect_source(source, cap or settings.SPECREG_MAX_HEADER_BYTES)
    except InspectError as exc:
        raise CheckError(str(exc)) from None


def check_sources(target: str, draft: str, user=None) -> tuple[PairCheck, ModelInfo, ModelInfo]:
    """Check two sources for ``user``: Hub files read with the server's token and its full header cap
    only for a user allowed to use them (registry.access)."""
    with hub_reads_for(user):
        cap = header_cap(user)
        t, d = info_for(target, cap), info_for(draft, cap)
    return check_pair(t, d), t, d


def local_partners(info: ModelInfo, limit: int = 50) -> list:
    """Registered files the local one could pair with, checked exactly (nothing is stored)."""
    tok = info.tokenizer
    if tok is None:
        return []
    qs = candidate_files(tok.vocab_type, tok.n_tokens, tok.vocab_key)
    out = []
    for f in qs.select_related("token_table", "model").defer("token_table__blob")[:limit]:
        other = load_info(f)
        local_is_target = info_is_target(info, f)
        result = check_pair(info, other) if local_is_target else check_pair(other, info)
        out.append((f, "draft" if local_is_target else "target", result))
    return sorted(out, key=lambda x: (not x[2].compatible, x[0].source))
