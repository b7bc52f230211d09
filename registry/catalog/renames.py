"""A name that changes anywhere (the admin, a script, an import) refreshes the pairs table's copied columns.

The table keeps the target's and draft's names and a search text on each pair row (``table_columns``),
so that sorting and searching touch one table. Renaming a family or model, or moving a model to
another family, would leave those copies stale; these receivers refresh the affected pairs.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save, pre_save

from registry.catalog.columns import refresh_table_columns
from registry.models import Family, GGUFFile, Model

_WATCHED = {Family: ("name",), Model: ("name", "family_id")}


def _remember_change(sender: type[Family | Model], instance: Any, **kwargs: Any) -> None:
    fields = _WATCHED[sender]
    old = sender.objects.filter(pk=instance.pk).values(*fields).first() if instance.pk else None
    instance._specreg_renamed = old is not None and any(old[f] != getattr(instance, f) for f in fields)


def _refresh(sender: type, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if created or not getattr(instance, "_specreg_renamed", False):
        return
    files = GGUFFile.objects.filter(model__family=instance) if sender is Family else instance.files.all()
    refresh_table_columns(files.values_list("pk", flat=True))


def connect() -> None:
    for model in _WATCHED:
        pre_save.connect(_remember_change, sender=model, dispatch_uid=f"specreg-rename-{model.__name__}")
        post_save.connect(_refresh, sender=model, dispatch_uid=f"specreg-refresh-{model.__name__}")
