"""Base models: which files are the same model, whichever repository they were uploaded to.

The rule, first that applies:
1. the Hub's model tree: ``base_model`` in the repository's card data, where it names exactly one model
   (a GGUF repository's card names the model it quantises);
2. the header: ``general.basename`` with ``general.size_label`` (and ``general.finetune`` where set), as
   convert_hf_to_gguf.py writes them from the original model's name; without a size label two sizes of one
   series would merge, so both are required;
3. the repository alone: the file's model within its repository (its name without the quant), so quants
   group as they always did and nothing joins across repositories (a local file: its name alone).
Before them all, rule 0: a draft adapted by ``adapt_draft`` (its ``specreg.adapted.*`` keys) is a model of its own
per original draft and target, whatever its names and card say: it keeps the draft's ``general.*`` names (and a
re-upload may keep the card), and joining the original would give the original's pairs the adapted file's verdicts.
A file that only claims to be adapted gains nothing by it: it is set apart, never joined to another model.
Rules 1 and 2 build the same key for the same model (``Qwen/Qwen2.5-Coder-0.5B-Instruct`` and basename
``Qwen2.5-Coder`` · ``0.5B`` · ``Instruct`` are both ``qwen2.5-coder-0.5b-instruct``), so a repository whose
card names its base and one whose card does not still meet. The owner is left out of those keys for that
reason; the repository rule keeps it, since a repository's name alone says nothing about its model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from inspector.info import ModelInfo
from registry.catalog.naming import model_name
from registry.catalog.sizes import DATA, FileSize, model_size
from registry.models import BaseClass, BaseModel, GGUFFile, HubJob

_SEPARATORS = re.compile(r"[\s_]+")
# How a checkpoint was quantised before conversion is not another model: Qwen's own GGUF of
# Qwen2.5-Coder-0.5B-Instruct says general.finetune "Instruct-AWQ" (it was converted from the AWQ upload).
_QUANTISED_FROM = re.compile(r"([-_ ](gguf|awq|gptq|int4|int8|fp8|bnb|4bit|8bit|mlx|exl2))+$", re.IGNORECASE)


def display(name: str) -> str:
    """The name as shown: without what the conversion appended (``Instruct-GGUF`` → ``Instruct``)."""
    return _QUANTISED_FROM.sub("", name.strip()) or name.strip()


def normalise(name: str) -> str:
    return _SEPARATORS.sub("-", display(name).lower())


@dataclass(frozen=True)
class BaseKey:
    key: str
    name: str
    rule: str


def base_key(info: dict[str, Any], repo: str, path: str, hub_base_models: list[str] | None = None) -> BaseKey:
    """The base model of a file from its stored inspection (``ModelInfo.to_dict()``), repository and path."""
    adapted = adapted_key(info, repo, path)
    if adapted is not None:
        return adapted
    bases = [b for b in (hub_base_models or []) if isinstance(b, str) and b.strip()]
    if len(bases) == 1:
        name = display(bases[0].rsplit("/", 1)[-1])
        if normalise(name):
            return BaseKey(normalise(name)[:300], name[:300], BaseModel.RULE_HUB)
    basename, size_label = info.get("basename"), info.get("size_label")
    if isinstance(basename, str) and basename.strip() and isinstance(size_label, str) and size_label.strip():
        finetune = (info.get("metadata") or {}).get("general.finetune")
        parts = [basename.strip(), size_label.strip()]
        if isinstance(finetune, str) and finetune.strip():
            parts.append(finetune.strip())
        name = display("-".join(parts))
        return BaseKey(normalise(name)[:300], name[:300], BaseModel.RULE_HEADER)
    name = model_name(path)
    if repo:
        return BaseKey(f"repo:{repo.lower()}/{name.lower()}"[:300], name[:300], BaseModel.RULE_REPO)
    return BaseKey(f"file:{name.lower()}"[:300], name[:300], BaseModel.RULE_REPO)


ADAPTED = "specreg.adapted."  # inspector.adapt.PREFIX: the keys adapt_draft writes into an adapted draft
_HEX = re.compile(r"[0-9a-f]{64}")


def adapted_key(info: dict[str, Any], repo: str, path: str) -> BaseKey | None:
    """Rule 0: an adapted draft's own model, keyed by the sha256s of the draft it was made from and of the target (or
    the target's header) it was made for; named as the draft would be, "adapted for" the target. None: not one."""
    meta = info.get("metadata") or {}
    draft_sha = meta.get(ADAPTED + "draft_sha256")
    target_sha = meta.get(ADAPTED + "target_sha256") or meta.get(ADAPTED + "target_header_sha256")
    if not (isinstance(draft_sha, str) and _HEX.fullmatch(draft_sha)):
        return None  # no provenance adapt_draft writes: an ordinary file
    target = meta.get(ADAPTED + "target")
    for_whom = display(target.rsplit("/", 1)[-1])[:120] if isinstance(target, str) and target.strip() else "a target"
    plain = {k: v for k, v in info.items() if k != "metadata"} | {
        "metadata": {k: v for k, v in meta.items() if not str(k).startswith(ADAPTED)}
    }
    draft = base_key(plain, repo, path)
    ident = f"{draft_sha[:16]}:{target_sha[:16] if isinstance(target_sha, str) else 'unknown'}"
    name = f"{draft.name} adapted for {for_whom}"
    return BaseKey(f"adapted:{ident}:{draft.key}"[:300], name[:300], BaseModel.RULE_ADAPTED)


@dataclass(frozen=True)
class AdaptedFrom:
    """What an adapted draft's own keys say it was made from, for its model page ("adapted from …")."""

    draft: str  # the original draft as adapt_draft named it (an hf:// source, or a local file's name)
    target: str
    fixes: str  # "bos, token_text"
    changed: int  # token texts changed
    original: GGUFFile | None  # the registered file whose content is the original draft, if any
    how: str = ""  # how the original is known: "sha256" (its Hub hash is the one named) or "adapted here" (a job)


def adapted_from(info: dict[str, Any], file_id: int | None = None) -> AdaptedFrom | None:
    """The provenance of an adapted draft (None for any other file). The original is linked only where it is known,
    not claimed: a registered file whose own sha256 is the one the adapted file names, or the draft an adapt job of
    this installation adapted into this very file (a local original has no sha256 to compare: its etag is its size
    and time). A claim about a file nobody registered links nothing."""
    meta = info.get("metadata") or {}
    draft_sha = meta.get(ADAPTED + "draft_sha256")
    if not (isinstance(draft_sha, str) and _HEX.fullmatch(draft_sha)):
        return None

    def text(key: str) -> str:
        v = meta.get(ADAPTED + key)
        return v[:300] if isinstance(v, str) else ""

    count = meta.get(ADAPTED + "changed_count")
    original, how = GGUFFile.objects.filter(etag=draft_sha).select_related("model").first(), "sha256"
    if original is None and file_id is not None:
        original, how = adapted_here(file_id), "adapted here"
    changed = count if isinstance(count, int) else 0
    return AdaptedFrom(text("draft"), text("target"), text("fixes"), changed, original, how if original else "")


def adapted_here(file_id: int) -> GGUFFile | None:
    """The draft an adapt job of this installation made ``file_id`` from (its params name the draft it read, its
    result the file it registered), if any and still registered."""
    job = (
        HubJob.objects.filter(kind=HubJob.ADAPT_DRAFT, status=HubJob.DONE, result__file=file_id)
        .order_by("-pk")
        .values_list("params", flat=True)
        .first()
    )
    draft = job.get("draft") if isinstance(job, dict) else None
    if not isinstance(draft, int) or draft == file_id:
        return None
    return GGUFFile.objects.filter(pk=draft).select_related("model").first()


def original_key(base: BaseModel) -> str | None:
    """The base model key of the original draft an adapted base model was made from (its key carries it, rule 0:
    ``adapted:<draft sha>:<target sha>:<original key>`` with the architecture after it); None for any other."""
    if not base.key.startswith("adapted:"):  # only rule 0 builds such a key (partner rows carry no rule)
        return None
    parts = base.key.split(":", 3)
    return parts[3] if len(parts) == 4 else None


def own_original(a: BaseModel, b: BaseModel) -> bool:
    """Whether one of the two base models is a draft adapted from the other: never a pair (adapting it back, or
    drafting with the same weights under other token texts, speeds nothing up)."""
    return original_key(a) == b.key or original_key(b) == a.key


def recount_quants(base_ids: Iterable[int | None]) -> None:
    """Count these base models' files again, in all and per tokenizer class (after files moved between base models,
    changed tokenizer or were deleted); registration adds one per new file itself. A class the model no longer has
    loses its row; a row whose file left names the model's first remaining file of that class."""
    for pk in {b for b in base_ids if b is not None}:
        BaseModel.objects.filter(pk=pk).update(quants=GGUFFile.objects.filter(model__base_id=pk).count())
        files = GGUFFile.objects.filter(model__base_id=pk, tokenizer_class__isnull=False).order_by("pk")
        first: dict[int, int] = {}
        counts: dict[int, int] = {}
        for file_id, class_id in files.values_list("pk", "tokenizer_class_id"):
            first.setdefault(class_id, file_id)
            counts[class_id] = counts.get(class_id, 0) + 1
        for row in BaseClass.objects.filter(base_id=pk):
            if row.tokenizer_class_id not in counts:
                row.delete()
                continue
            owned = GGUFFile.objects.filter(pk=row.file_id, model__base_id=pk).exists()
            row.files = counts[row.tokenizer_class_id]
            row.file_id = row.file_id if owned else first[row.tokenizer_class_id]
            row.save(update_fields=["files", "file"])


def publisher_of(hub_base_models: list[str] | None) -> str:
    """The owner the card's one base_model names (``Qwen`` for ``Qwen/Qwen2.5-Coder-0.5B-Instruct``), or ""."""
    bases = [b for b in (hub_base_models or []) if isinstance(b, str) and b.strip()]
    return bases[0].split("/", 1)[0].strip()[:100] if len(bases) == 1 and "/" in bases[0] else ""


def with_architecture(key: str, architecture: str) -> str:
    """A base model holds one model: its key carries the architecture, so a Mamba-2 or Qwen3-Next file that
    shares a name (a header, a card's claim) with an attention-only model never joins it."""
    suffix = f"@{architecture.lower()}" if architecture else ""
    return key[: 300 - len(suffix)] + suffix


def base_for(info: dict[str, Any], repo: str, path: str, hub_base_models: list[str] | None = None) -> BaseModel:
    """The file's base model (one architecture), created on first sight."""
    k = base_key(info, repo, path, hub_base_models)
    arch = str(info.get("architecture") or "")[:64]
    params = int(info.get("parameter_count") or 0)  # the first file's; base_parameters keeps it robust
    # A card naming its own uploader ("evil/Model" in evil's repository) attests nothing: any account could make
    # itself the publisher and take over the files every pair shows. Only a third party's card names one (Qwen's
    # own GGUF repository gets it from the first other uploader whose card names Qwen/…).
    named = publisher_of(hub_base_models) if k.rule == BaseModel.RULE_HUB else ""
    publisher = named if named and named.lower() != repo.split("/", 1)[0].lower() else ""
    base, _ = BaseModel.objects.get_or_create(
        key=with_architecture(k.key, arch),
        defaults={
            "name": k.name,
            "rule": k.rule,
            "architecture": arch,
            "parameter_count": params,
            "publisher": publisher,
        },
    )
    if publisher and not base.publisher:
        # Named by a card only now (the model came first from a header). The owner comes from the card's
        # base_model, not from the uploader, so a claim by anyone names the same publisher.
        BaseModel.objects.filter(pk=base.pk, publisher="").update(publisher=publisher)
        base.publisher = publisher
    return base


def base_parameters(base: BaseModel, info: ModelInfo, f: GGUFFile) -> bool:
    """Keep the base model's size the best evidence its files give (registry.catalog.sizes): the lower median of the
    files that hold their tensors' data, else of those listing tensors, else of their size labels. A header-only file
    states any count it likes, and one far from the others is outvoted: neither moves the size, which decides which
    model is the target and which rows are listed. Returns whether the size changed (the caller orients the model's
    pairs again). The common quant of a model sized by its data, agreeing with it, costs nothing."""
    if info.parameter_count == base.parameter_count and info.data_complete is not False and base.size_evidence == DATA:
        return False
    return resize(base)


def resize(base: BaseModel) -> bool:
    """Size the base model again from its files (``base_parameters``' rule); whether its size changed. (Its name
    needs no such care: the key its rule builds, which no upload can change but for case, is where it comes from.)"""
    rows = GGUFFile.objects.filter(model__base=base).values_list(
        "parameter_count", "info__data_complete", "info__size_label"
    )[:2001]
    size = model_size(FileSize(c, complete, label) for c, complete, label in rows)
    if (size.parameter_count, size.evidence) == (base.parameter_count, base.size_evidence):
        return False
    BaseModel.objects.filter(pk=base.pk).update(parameter_count=size.parameter_count, size_evidence=size.evidence)
    changed = size.parameter_count != base.parameter_count
    base.parameter_count, base.size_evidence = size.parameter_count, size.evidence
    return changed
