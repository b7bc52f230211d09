"""Deleting files keeps what belongs to their base models: a pair (with its results, notes, predictions, reported
figures and verdict history) checked on a deleted quant moves to another quant of the same base model, and so does
the base model's row for a tokenizer class. Only a base model's last file takes its pairs with it."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from registry.cache_keys import bump_generation
from registry.catalog.bases import recount_quants
from registry.catalog.columns import refresh_table_columns
from registry.catalog.settling import resettle
from registry.models import BaseClass, GGUFFile, Pair


def move_off(file_ids: Iterable[int]) -> int:
    """Before these files are deleted: point what was checked on them at other quants of their base models (one of
    the same tokenizer class first, so the verdict stays the one decided). Returns the pairs moved."""
    gone = set(file_ids)
    moved, heirs = 0, set()
    for f in GGUFFile.objects.filter(pk__in=gone).select_related("model"):
        if f.model.base_id is None:
            continue
        others = GGUFFile.objects.filter(model__base_id=f.model.base_id).exclude(pk__in=gone).order_by("pk")
        same = others.filter(tokenizer_class_id=f.tokenizer_class_id).first()
        if same is not None:
            BaseClass.objects.filter(file=f).update(file=same)
        heir = same or others.first()
        if heir is None:
            continue  # the base model's last file: nothing is left to check its pairs on
        moved += Pair.objects.filter(target=f).update(target=heir) + Pair.objects.filter(draft=f).update(draft=heir)
        heirs.add(heir.pk)
    if heirs:
        refresh_table_columns(heirs)  # the rows' search text names the file they are checked on
    return moved


def unregister(file_ids: Iterable[int]) -> int:
    """Delete these files' registrations as the admin's deletion does: what was checked on them moves to other quants
    first (``move_off``), then the base models' quant counts and pairs are settled again. Returns the files deleted."""
    ids = list(file_ids)
    base_ids = list(GGUFFile.objects.filter(pk__in=ids).values_list("model__base_id", flat=True))
    with transaction.atomic():
        move_off(ids)
        _, by_model = GGUFFile.objects.filter(pk__in=ids).delete()
    recount_quants(base_ids)
    resettle(base_ids)  # a class may have gone with the file
    bump_generation()
    return by_model.get(GGUFFile._meta.label, 0)
