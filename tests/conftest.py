"""Shared fixtures: the real small models (fetched once per machine); the plugins below hold the rest (the local
test Hub, the worker, the browser, registered files, accounts, near-miss files, llama.cpp's probe ...)."""

from __future__ import annotations

import threading
import time

import pytest

from runner.llama import procs
from tests.models import model_path

pytest_plugins = [
    "tests.hub",
    "tests.worker",
    "tests.browser.chromium",
    "tests.registering",
    "tests.accounts",
    "tests.near_miss",
    "tests.llama_probe",
    "tests.hub_repos",
    "tests.real_files",
    "tests.knowledge_bases",
]


@pytest.fixture(scope="session")
def smollm2_path():
    return model_path("smollm2")


@pytest.fixture(scope="session")
def gemma3_header_path():
    return model_path("gemma3", headers_only=True)


@pytest.fixture(scope="session")
def qwen05_header_path():
    return model_path("qwen05", headers_only=True)


@pytest.fixture(scope="session")
def qwen15_header_path():
    return model_path("qwen15", headers_only=True)


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Cached table pages and facets must not leak between tests."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def still_clock(monkeypatch):
    """Rate-limit windows are fixed minutes and hours: a test that fills one must not straddle a
    boundary (its count would start again half-way). The limits' clock stands still here, a
    second into an hour."""
    import types

    from registry.access import rate_limits

    now = (time.time() // 3600) * 3600 + 1
    monkeypatch.setattr(rate_limits, "time", types.SimpleNamespace(time=lambda: now))
    return now


@pytest.fixture(autouse=True, scope="session")
def _cost_measurements_once():
    """The suite runs beside itself (two workers on two cores), so nearly every cost measurement it takes is
    disturbed (runner.predict.conditions) and would be taken three times: here once, kept marked.
    tests/runner/test_cost_conditions.py sets the retakes it tests."""
    import os

    os.environ.setdefault("SPECREG_COST_REMEASURE", "0")
    yield


def pytest_configure(config):
    """A suite stopped by SIGTERM or SIGHUP (a CI time limit, a closed terminal) stops the llama-server processes its
    tests started in-process: they lead process groups of their own, out of reach of a signal to the suite's group."""
    if threading.current_thread() is threading.main_thread():
        procs.stop_on_termination()
