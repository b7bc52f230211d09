"""Adapted drafts' provenance: what specreg verified about a file that says ``adapt_draft`` made it.

adapt_draft writes ``specreg.adapted.*`` keys (the original draft's sha256 and name, the target's, the token texts
changed, a digest of the tensor data). Keys are claims: anyone can write them into any header. A file is an adapted
draft in the registry (its own base model, "adapted from" its original: registry.catalog.bases, rule 0) only where
specreg can vouch for it: an adapt job of this installation wrote it, or its tensor data and its original's, both on
this machine, hash alike. Otherwise it is an ordinary file, and its page says the claim was not verified.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from huggingface_hub import try_to_load_from_cache

from inspector.adapt import AdaptError, file_digests
from registry.model_folder import model_dir
from registry.models import BaseModel, GGUFFile, HubJob

ADAPTED = "specreg.adapted."  # inspector.adapt.PREFIX: the keys adapt_draft writes into an adapted draft
_HEX = re.compile(r"[0-9a-f]{64}")


def claimed(info: dict[str, Any], key: str) -> str:
    value = (info.get("metadata") or {}).get(ADAPTED + key)
    return value[:300] if isinstance(value, str) else ""


def claims_adaptation(info: dict[str, Any]) -> bool:
    """Whether the file carries the provenance keys adapt_draft writes (a claim, until ``verify_adapted``)."""
    return bool(_HEX.fullmatch(claimed(info, "draft_sha256")))


@dataclass(frozen=True)
class Verified:
    """An adapted draft's provenance as specreg checked it: the registered original draft, the target it was made
    for (``t<id>``: a registered file an adapt job read; otherwise the start of the hash the file names, which only
    names the model), and how it is known ("adapted here": an adapt job of this installation wrote it; "tensor
    data": its tensor data and the original's, hashed here, are the same)."""

    original: GGUFFile
    target: str
    how: str


def verify_adapted(
    info: dict[str, Any], source: str, file_id: int | None = None, made_by: tuple[int, int] | None = None
) -> Verified | None:
    """The provenance of a file that claims to be an adapted draft, where specreg can vouch for it; None for any
    other file and for a claim it cannot check. ``made_by``: the (draft, target) file ids of the adapt job
    registering the file now; a file registered before is looked up in the jobs that made it. Otherwise the
    file's tensor data, on this machine, must hash to a registered original's (``_by_tensor_data``)."""
    if not claims_adaptation(info):
        return None
    job = made_by or (adapted_by_job(file_id) if file_id is not None else None)
    if job is not None:
        original = GGUFFile.objects.filter(pk=job[0]).select_related("model__base").first()
        return Verified(original, f"t{job[1]}", "adapted here") if original is not None else None
    return _by_tensor_data(info, source)


def _local(path: str) -> bool:
    return bool(path) and os.path.isabs(path) and os.path.isfile(path)


def _by_tensor_data(info: dict[str, Any], source: str) -> Verified | None:
    """A file adapted on the command line and registered later: verified when its tensor data and its original's
    are both on this machine and hash alike. The original is a registered file the keys name (by its Hub sha256 or
    its source); its data is found by ``_original_copy``."""
    if not (_local(source) and info.get("data_complete") is not False and int(info.get("n_tensors") or 0) > 0):
        return None
    draft_sha, draft_path = claimed(info, "draft_sha256"), claimed(info, "draft")
    candidates = GGUFFile.objects.filter(Q(etag=draft_sha) | Q(source=draft_path) if draft_path else Q(etag=draft_sha))
    candidates = candidates.select_related("model__base")
    mine: str | None = None
    for original in candidates[:5]:
        if original.source == source:
            continue
        copy = _original_copy(original, draft_path, source)
        if copy is None:
            continue
        try:
            mine = mine or file_digests(source)[1]
            whole, tensors = file_digests(copy)
        except AdaptError:
            return None
        if tensors == mine and (copy == original.source or whole == original.etag):
            target = claimed(info, "target_sha256") or claimed(info, "target_header_sha256")
            return Verified(original, target[:16] or "unknown", "tensor data")
    return None


@dataclass(frozen=True)
class AdaptedFrom:
    """What an adapted draft's own keys say it was made from, for its model page ("adapted from …")."""

    draft: str  # the original draft as adapt_draft named it (an hf:// source, or a local file's name)
    target: str
    fixes: str  # "bos, token_text"
    changed: int  # token texts changed
    original: GGUFFile | None  # the registered original, where specreg verified the file (None: a claim only)
    how: str = ""  # how it is known: "adapted here" (an adapt job wrote it) or "tensor data" (hashed alike here)


def adapted_from(info: dict[str, Any], base: BaseModel | None, file_id: int | None = None) -> AdaptedFrom | None:
    """The provenance an adapted draft's page shows (None for a file that claims none). The original is linked only
    where specreg verified it (the file's base model is an adapted one, rule 0, keyed by the original); a claim
    alone links nothing and the page says the file is an ordinary one."""
    if not claims_adaptation(info):
        return None
    count = (info.get("metadata") or {}).get(ADAPTED + "changed_count")
    changed = count if isinstance(count, int) else 0
    original, how = None, ""
    parts = base.key.split(":", 3) if base is not None and base.rule == BaseModel.RULE_ADAPTED else []
    if len(parts) == 4 and parts[1].isdigit():
        original = GGUFFile.objects.filter(pk=int(parts[1])).select_related("model").first()
        how = "adapted here" if file_id is not None and adapted_by_job(file_id) else "tensor data"
    return AdaptedFrom(claimed(info, "draft"), claimed(info, "target"), claimed(info, "fixes"), changed, original, how)


def adapted_by_job(file_id: int) -> tuple[int, int] | None:
    """The (draft, target) file ids of the adapt job of this installation that made ``file_id`` (its params name the
    files it read, its result the file it registered), if any."""
    params = (
        HubJob.objects.filter(kind=HubJob.ADAPT_DRAFT, status=HubJob.DONE, result__file=file_id)
        .order_by("-pk")
        .values_list("params", flat=True)
        .first()
    )
    if not isinstance(params, dict):
        return None
    draft, target = params.get("draft"), params.get("target")
    if not isinstance(draft, int) or draft == file_id:
        return None
    return draft, target if isinstance(target, int) else 0


def _original_copy(original: GGUFFile, draft_name: str, source: str) -> str | None:
    """A local copy of a registered original's data: the file itself when it is local; for a Hub file (its etag its
    sha256), the model folder's download of it, or the file adapt_draft read where it usually lies, beside the
    adapted one under the name the keys give (the caller checks its whole sha256 against the Hub's)."""
    if _local(original.source):
        return original.source
    if not _HEX.fullmatch(original.etag or ""):
        return None
    if original.repo and original.path:
        cached = try_to_load_from_cache(
            original.repo, original.path, cache_dir=model_dir() / "hub", revision=original.commit or None
        )
        if isinstance(cached, str) and _local(cached):
            return cached
    beside = os.path.join(os.path.dirname(source), os.path.basename(draft_name)) if draft_name else ""
    return beside if _local(beside) else None
