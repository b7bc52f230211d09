"""Functions named in settings by dotted path: how a module low in the layers calls code above it.

The pair's full check (``SPECREG_PAIR_FULL_CHECK``) lives in the catalog, above the models that call it; the notes
the table's search also matches (``SPECREG_TABLE_SEARCH_HOOKS``) live in the team app, above the table. A setting
names them, so no module imports upwards and no app's ``ready()`` has to patch another module.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string


@cache
def resolved(path: str) -> Callable[..., Any]:
    """The function at ``path`` ("package.module.name"), imported once per process."""
    return import_string(path)


def named(setting: str) -> Callable[..., Any] | None:
    """The function a setting names (None where it names none)."""
    path = getattr(settings, setting, "")
    return resolved(path) if path else None


def all_named(setting: str) -> list[Callable[..., Any]]:
    """The functions a setting lists, in its order."""
    return [resolved(path) for path in getattr(settings, setting, ())]
