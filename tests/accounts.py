"""Accounts a test signs in with (a pytest plugin: tests/conftest.py names it)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password="pw-alice-123456")


@pytest.fixture
def staff() -> User:
    return User.objects.create_user("sam", password="pw-sam-123456", is_staff=True)


def client_for(user: User) -> Client:
    """A client signed in as ``user``."""
    c = Client()
    c.force_login(user)
    return c
