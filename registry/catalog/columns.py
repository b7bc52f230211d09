"""The pair row's copied columns: the target's and draft's names and a search text, kept on each Pair so that
the table sorts and searches one table. Registration sets them; a rename refreshes them (renames.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from registry.cache_keys import bump_generation
from registry.models import GGUFFile, Pair


def display_name(f: GGUFFile) -> str:
    """A file's model as rows name it: its base model's name (the same model whichever of its files a row shows,
    named from its headers or card: registry.catalog.bases), else its own model's (a file's name without the quant)."""
    base = f.model.base if f.model.base_id else None
    return base.name if base is not None else f.model.name


def file_search_text(f: GGUFFile) -> str:
    """What the search box matches in one file, lower-case: source, model, base model ("DeepSeek-R1-Distill-Qwen-7B",
    named from its headers or card), architecture and family; one per line (shown_search reads lines)."""
    family = f.model.family.name if f.model.family_id and f.model.family is not None else ""
    names = dict.fromkeys((f.model.name, display_name(f)))  # in order, once each
    return "\n".join((f.source, *names, f.architecture, family)).lower()


def table_columns(target: GGUFFile, draft: GGUFFile) -> dict[str, Any]:
    """The Pair columns the table sorts and searches by, copied from its two files.

    Registration sets them on every pair it creates or re-checks (``Pair(**table_columns(t, d))``);
    the files should come with ``select_related("model__family")``.
    """
    return {
        "target_name": display_name(target),
        "draft_name": display_name(draft),
        "search_text": f"{file_search_text(target)}\n{file_search_text(draft)}",
    }


def refresh_table_columns(file_ids: Iterable[int]) -> int:
    """Recompute ``table_columns`` for every pair of these files (after a model's name or family changed)."""
    ids = list(file_ids)
    pairs = list(
        Pair.objects.filter(Q(target_id__in=ids) | Q(draft_id__in=ids))
        .select_related("target__model__family", "target__model__base", "draft__model__family", "draft__model__base")
        .only(
            "target__source",
            "target__architecture",
            "target__model__name",
            "target__model__base__name",
            "target__model__family__name",
            "draft__source",
            "draft__architecture",
            "draft__model__name",
            "draft__model__base__name",
            "draft__model__family__name",
        )
    )
    for p in pairs:
        for k, v in table_columns(p.target, p.draft).items():
            setattr(p, k, v)
    Pair.objects.bulk_update(pairs, ["target_name", "draft_name", "search_text"], batch_size=500)
    bump_generation()
    return len(pairs)
