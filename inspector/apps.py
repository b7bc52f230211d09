from __future__ import annotations

from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
