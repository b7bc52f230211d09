"""Records of other apps in a knowledge base: one export and one import function per section.

The registry's own records (files, pairs, runs, reported results) are written by ``export`` and
read by ``importer``; an app such as the team's notes, deployments and observed telemetry adds its
own with ``register_section`` in a ``kb_sections`` module, found like ``admin.py`` (the app depends on the
registry, never the other way round). A section's records name files and pairs by source, through the contexts
below, and carry their provenance (``ExportContext.provenance``), so the importer can keep
records from elsewhere beside local ones and find what an earlier import brought.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import models
from django.utils.module_loading import autodiscover_modules


@dataclass
class ExportContext:
    installation: str  # this installation's id

    def provenance(self, obj: Any, author: str = "") -> dict[str, Any]:
        """Where ``obj`` (a model with registry.models.Provenance fields) was made, for its record."""
        if getattr(obj, "origin_installation", ""):
            return {
                "installation": obj.origin_installation,
                "id": obj.origin_id,
                "author": getattr(obj, "origin_author", ""),
            }
        return {"installation": self.installation, "id": obj.pk, "author": author}


@dataclass
class ImportContext:
    installation: str  # this installation's id
    source_installation: str  # the id of the installation that wrote the file
    now: datetime
    file: Callable[[str], Any]  # an exported source → the GGUFFile it is here (KBError if none)
    pair: Callable[[str, str], Any]  # target and draft sources → the Pair here (checked now if new)
    counts: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def already_here(self, model: type[models.Model], installation: str, origin_id: int) -> bool:
        """Whether this record (made at ``installation`` with id ``origin_id``) is here already: ours
        when the installation is this one, or brought by an earlier import."""
        # One of ours carries no origin; if it was deleted, an import brings it back with one.
        ours = model._default_manager.filter(pk=origin_id, origin_installation="")
        if installation == self.installation and ours.exists():
            return True
        return model._default_manager.filter(origin_installation=installation, origin_id=origin_id).exists()


@dataclass
class Section:
    name: str
    export: Callable[[ExportContext], list[dict[str, Any]]]
    # Its records as the importer streams them (an iterable, read once); raise KBError on a bad record.
    import_records: Callable[[ImportContext, Iterable[Any]], None]


SECTIONS: dict[str, Section] = {}


def register_section(section: Section) -> None:
    SECTIONS[section.name] = section


def load_sections() -> dict[str, Section]:
    """Every app's sections: each installed app's ``kb_sections`` module registers its own on import."""
    autodiscover_modules("kb_sections")
    return SECTIONS
