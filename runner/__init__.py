"""The benchmark runner: downloads models and measures pairs with real llama.cpp via Celery."""
from .celery import app as celery_app

__all__ = ["celery_app"]
