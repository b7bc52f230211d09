"""The benchmark runner: downloads models and measures pairs with real llama.cpp via Celery.

The Celery app lives in ``runner.celery`` (``celery -A runner`` finds it there); it is not
imported here, so commands and pages that never queue do not pay for loading Celery.
"""
