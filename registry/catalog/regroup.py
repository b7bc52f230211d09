"""Staff's corrections to grouping: a model whose files were grouped into the wrong base model moves out to a base
model of its own (the repository rule), and its files are paired again from there.

Base models group by card, header or repository (registry.catalog.bases), and a name can lie. The admin's action
calls ``move_out``; nothing attached to a pair is lost: pairs stay with the base models they joined, each settled
again on the files its models still have (registry.catalog.combinations).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from registry.cache_keys import bump_generation
from registry.catalog.bases import recount_quants, with_architecture
from registry.catalog.combinations import resettle
from registry.catalog.naming import model_name
from registry.catalog.pairing import compute_pairs
from registry.catalog.stored import load_info
from registry.models import BaseClass, BaseModel, GGUFFile, Model


def own_base(model: Model) -> BaseModel:
    """The base model of the repository rule for ``model``: its name within its repository, with its architecture."""
    name = model_name(model.name)
    key = f"repo:{model.repo.lower()}/{name.lower()}" if model.repo else f"file:{name.lower()}"
    base, _ = BaseModel.objects.get_or_create(
        key=with_architecture(key, model.architecture),
        defaults={
            "name": name[:300],
            "rule": BaseModel.RULE_REPO,
            "architecture": model.architecture[:64],
            "parameter_count": model.parameter_count,
        },
    )
    return base


def move_out(model_ids: Iterable[int]) -> list[BaseModel]:
    """Move these models (with all their files) to base models of their own and pair their files again."""
    moved = []
    for model in Model.objects.filter(pk__in=list(model_ids)).select_related("base"):
        old = model.base_id
        with transaction.atomic():
            base = own_base(model)
            if base.pk == old:
                continue
            Model.objects.filter(pk=model.pk).update(base=base)
            files = list(model.files.order_by("pk"))
            BaseClass.objects.bulk_create(
                [
                    BaseClass(base=base, tokenizer_class_id=f.tokenizer_class_id, file=f)
                    for f in files
                    if f.tokenizer_class_id
                ],
                ignore_conflicts=True,
            )
            recount_quants([old, base.pk])  # both sides' counts, and the old model's class rows that lost their file
            resettle([old])
        firsts = {f.tokenizer_class_id: f for f in reversed(files)}
        for f in firsts.values():  # one file per class brings the new base model's pairs
            f = GGUFFile.objects.select_related("model__base", "token_table", "tokenizer_class").get(pk=f.pk)
            with transaction.atomic():
                compute_pairs(f, load_info(f))
        moved.append(base)
    bump_generation()
    return moved
