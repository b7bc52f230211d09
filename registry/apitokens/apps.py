from __future__ import annotations

from django.apps import AppConfig


class ApiTokensConfig(AppConfig):
    name = "registry.apitokens"
    label = "apitokens"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "API tokens"
