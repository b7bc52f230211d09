"""The pair row's copied columns: the target's and draft's names and a search text, kept on each Pair so that
the table sorts and searches one table. Registration sets them; a rename refreshes them (renames.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from registry.cache_keys import bump_generation
from registry.models import GGUFFile, Pair


def file_search_text(f: GGUFFile) -> str:
    """What the search box matches in one file: source, model, architecture and family, lower-case."""
    family = f.model.family.name if f.model.family_id and f.model.family is not None else ""
    return "\n".join((f.source, f.model.name, f.architecture, family)).lower()


def table_columns(target: GGUFFile, draft: GGUFFile) -> dict[str, Any]:
    """The Pair columns the table sorts and searches by, copied from its two files.

    Registration sets them on every pair it creates or re-checks (``Pair(**table_columns(t, d))``);
    the files should come with ``select_related("model__family")``.
    """
    return {
        "target_name": target.model.name,
        "draft_name": draft.model.name,
        "search_text": f"{file_search_text(target)}\n{file_search_text(draft)}",
    }


def refresh_table_columns(file_ids: Iterable[int]) -> int:
    """Recompute ``table_columns`` for every pair of these files (after a model's name or family changed)."""
    ids = list(file_ids)
    pairs = list(
        Pair.objects.filter(Q(target_id__in=ids) | Q(draft_id__in=ids))
        .select_related("target__model__family", "draft__model__family")
        .only(
            "target__source",
            "target__architecture",
            "target__model__name",
            "target__model__family__name",
            "draft__source",
            "draft__architecture",
            "draft__model__name",
            "draft__model__family__name",
        )
    )
    for p in pairs:
        for k, v in table_columns(p.target, p.draft).items():
            setattr(p, k, v)
    Pair.objects.bulk_update(pairs, ["target_name", "draft_name", "search_text"], batch_size=500)
    bump_generation()
    return len(pairs)
