"""Base models: which files are the same model, whichever repository they were uploaded to.

The rule, first that applies:
1. the Hub's model tree: ``base_model`` in the repository's card data, where it names exactly one model
   (a GGUF repository's card names the model it quantises);
2. the header: ``general.basename`` with ``general.size_label`` (and ``general.finetune`` where set), as
   convert_hf_to_gguf.py writes them from the original model's name; without a size label two sizes of one
   series would merge, so both are required;
3. the repository alone: the file's model within its repository (its name without the quant), so quants
   group as they always did and nothing joins across repositories (a local file: its name alone).
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

from registry.catalog.naming import model_name
from registry.models import BaseModel, GGUFFile

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


def recount_quants(base_ids: Iterable[int | None]) -> None:
    """Count these base models' files again (after files moved between base models or were deleted); registration
    adds one per new file itself."""
    for pk in {b for b in base_ids if b is not None}:
        BaseModel.objects.filter(pk=pk).update(quants=GGUFFile.objects.filter(model__base_id=pk).count())


def base_for(info: dict[str, Any], repo: str, path: str, hub_base_models: list[str] | None = None) -> BaseModel:
    """The file's base model, created on first sight; its size is its largest file's (quants agree anyway)."""
    k = base_key(info, repo, path, hub_base_models)
    params = int(info.get("parameter_count") or 0)
    arch = str(info.get("architecture") or "")[:64]
    base, created = BaseModel.objects.get_or_create(
        key=k.key, defaults={"name": k.name, "rule": k.rule, "architecture": arch, "parameter_count": params}
    )
    if not created and params > base.parameter_count:
        BaseModel.objects.filter(pk=base.pk, parameter_count__lt=params).update(parameter_count=params)
        base.parameter_count = params
    return base
