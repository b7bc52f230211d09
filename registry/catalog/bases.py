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
Its provenance is what specreg verified, never what the keys claim (``verify_adapted``): an adapt job of this
installation made it, or its tensor data, hashed here, is the registered original's. A file that only claims to be
adapted is an ordinary file set apart by the repository rule: it joins nothing, and no two such files meet.
Rules 1 and 2 build the same key for the same model (``Qwen/Qwen2.5-Coder-0.5B-Instruct`` and basename
``Qwen2.5-Coder`` · ``0.5B`` · ``Instruct`` are both ``qwen2.5-coder-0.5b-instruct``), so a repository whose
card names its base and one whose card does not still meet. The owner is left out of those keys for that
reason; the repository rule keeps it, since a repository's name alone says nothing about its model.

Names are claims, so joining an existing base model by rule 1 or 2 takes evidence the uploader cannot simply
write (``admitted``): the file's tokenizer class (or that of another file of its model) is one the base model
already holds, or the file is the card-named publisher's own, or it is a file on this machine (the operator's).
A newcomer's variant (other token texts under the same names) starts a base model of its own by the repository
rule until staff join it to the base its names claim (the admin's "join the base model its names claim").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from inspector.info import ModelInfo
from registry.catalog.naming import model_name
from registry.catalog.provenance import Verified, claimed, claims_adaptation
from registry.catalog.sizes import DATA, FileSize, model_size
from registry.models import BaseClass, BaseModel, GGUFFile

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


def repository_key(repo: str, path: str) -> BaseKey:
    """Rule 3: the file's model within its repository (a local file: its name alone)."""
    name = model_name(path)
    if repo:
        return BaseKey(f"repo:{repo.lower()}/{name.lower()}"[:300], name[:300], BaseModel.RULE_REPO)
    return BaseKey(f"file:{name.lower()}"[:300], name[:300], BaseModel.RULE_REPO)


def base_key(
    info: dict[str, Any],
    repo: str,
    path: str,
    hub_base_models: list[str] | None = None,
    verified: Verified | None = None,
) -> BaseKey:
    """The base model of a file from its stored inspection (``ModelInfo.to_dict()``), repository and path, and its
    verified provenance where it is an adapted draft (``verify_adapted``)."""
    if verified is not None:
        return adapted_key(info, verified)
    if claims_adaptation(info):
        return repository_key(repo, path)  # claimed provenance only: set apart, never joined (rule 0)
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
    return repository_key(repo, path)


def adapted_key(info: dict[str, Any], verified: Verified) -> BaseKey:
    """Rule 0: the adapted draft's own model, keyed by its verified original (its registered file and base model)
    and its target; named as the original's model, "adapted for" the target."""
    target = claimed(info, "target")
    for_whom = display(target.rsplit("/", 1)[-1])[:120] if target.strip() else "a target"
    original = verified.original.model.base
    key = original.key if original is not None else f"file:{verified.original.pk}"
    name = original.name if original is not None else model_name(verified.original.path)
    ident = f"{verified.original.pk}:{verified.target}"
    return BaseKey(f"adapted:{ident}:{key}"[:300], f"{name} adapted for {for_whom}"[:300], BaseModel.RULE_ADAPTED)


def original_key(base: BaseModel) -> str | None:
    """The base model key of the original draft an adapted base model was made from (its key carries it, rule 0:
    ``adapted:<original file id>:<target>:<original's key>``); None for any other."""
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


def stored_key(k: BaseKey, architecture: str) -> str:
    """The key a base model is stored under: with its architecture (``with_architecture``), but for an adapted one,
    whose key carries its original's key, architecture and all."""
    return k.key[:300] if k.rule == BaseModel.RULE_ADAPTED else with_architecture(k.key, architecture)


def with_architecture(key: str, architecture: str) -> str:
    """A base model holds one model: its key carries the architecture, so a Mamba-2 or Qwen3-Next file that
    shares a name (a header, a card's claim) with an attention-only model never joins it."""
    suffix = f"@{architecture.lower()}" if architecture else ""
    return key[: 300 - len(suffix)] + suffix


def base_for(
    info: dict[str, Any],
    repo: str,
    path: str,
    hub_base_models: list[str] | None = None,
    *,
    class_id: int | None = None,
    verified: Verified | None = None,
) -> BaseModel:
    """The file's base model (one architecture), created on first sight. ``class_id``: the file's tokenizer class,
    which decides whether it may join an existing base model its names claim (``admitted``)."""
    k = base_key(info, repo, path, hub_base_models, verified)
    arch = str(info.get("architecture") or "")[:64]
    key = stored_key(k, arch)
    if k.rule in (BaseModel.RULE_HUB, BaseModel.RULE_HEADER):
        claimed = BaseModel.objects.filter(key=key).first()
        if claimed is not None and not admitted(claimed, repo, class_id):
            k = repository_key(repo, path)  # a newcomer's variant: a model of its own until staff join it
            key = with_architecture(k.key, arch)
    params = int(info.get("parameter_count") or 0)  # the first file's; base_parameters keeps it robust
    # A card naming its own uploader ("evil/Model" in evil's repository) attests nothing: any account could make
    # itself the publisher and take over the files every pair shows. Only a third party's card names one (Qwen's
    # own GGUF repository gets it from the first other uploader whose card names Qwen/…).
    named = publisher_of(hub_base_models) if k.rule == BaseModel.RULE_HUB else ""
    publisher = named if named and named.lower() != repo.split("/", 1)[0].lower() else ""
    base, _ = BaseModel.objects.get_or_create(
        key=key,
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


def admitted(base: BaseModel, repo: str, class_id: int | None) -> bool:
    """Whether a file whose names claim ``base`` (rules 1 and 2) joins it: on evidence an uploader cannot simply
    write. Its tokenizer class is one the base model already holds, or its repository already has files in the base
    model (a repository's re-conversion beside its established quants); or the base model holds no class yet (the
    first files establish it); or it is a file on this machine, which its operator registered. A card's publisher is
    no such evidence: any account can write a card naming any owner."""
    if not repo or class_id is None:
        return True
    held = BaseClass.objects.filter(base=base)
    if not held.exists() or held.filter(tokenizer_class_id=class_id).exists():
        return True
    return GGUFFile.objects.filter(model__base=base, repo=repo).exists()


def admitted_classes(held: set[int], repos: set[str], repo: str, classes: set[int]) -> bool:
    """``admitted``'s rule on sets (a registry grouped again): nothing held yet, a file on this machine, a class in
    common, or a repository already in the base model."""
    return not held or not repo or not classes or bool(held & classes) or repo in repos


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
