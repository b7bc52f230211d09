from __future__ import annotations

from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from registry.access.login_throttle import count_failure
        from registry.catalog import renames
        from registry.catalog.pairing import full_check
        from registry.models import Pair

        user_login_failed.connect(count_failure, dispatch_uid="specreg-login-throttle")
        renames.connect()
        Pair.full_check = full_check  # the models sit below the catalog: the check is handed down, not imported
        import registry.celery  # noqa: F401  (the configured Celery app becomes current: tasks are sent through it)
