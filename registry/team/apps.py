from __future__ import annotations

from django.apps import AppConfig


class TeamConfig(AppConfig):
    name = "registry.team"
    label = "team"
    verbose_name = "Team knowledge base"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from registry.table.query import SEARCH_HOOKS
        from registry.team.notes import note_search_q

        if note_search_q not in SEARCH_HOOKS:  # the table's search finds pairs through notes too
            SEARCH_HOOKS.append(note_search_q)
