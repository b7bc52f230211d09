from __future__ import annotations

from django.apps import AppConfig


class TeamConfig(AppConfig):
    name = "registry.team"
    label = "team"
    verbose_name = "Team knowledge base"
    default_auto_field = "django.db.models.BigAutoField"
