"""The runner's one error a user sees when a benchmark, prediction or soak cannot be queued or run."""

from __future__ import annotations


class BenchmarkError(Exception):
    """A benchmark cannot be queued or run; one line."""
