from __future__ import annotations

from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from registry.access.login_throttle import count_failure
        from registry.catalog import renames

        user_login_failed.connect(count_failure, dispatch_uid="specreg-login-throttle")
        renames.connect()
        import registry.celery  # noqa: F401  (the configured Celery app becomes current: tasks are sent through it)
