"""A test whose real part (llama.cpp, Chromium, a model file, a server) is missing: skip locally, fail under CI."""

from __future__ import annotations

import os

import pytest


def missing(what: str) -> None:
    """Skip on a developer's machine; under CI (CI=true) a missing real part is a failure, not a skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required for this test under CI: {what}", pytrace=False)
    pytest.skip(what)
