"""Deployment settings and logins: a race-free private secret key, HTTPS settings, CSP, login throttling."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from registry.access.client import client_ip

ROOT = Path(__file__).resolve().parents[2]


def _env(data: Path, **extra: str) -> dict[str, str]:
    # DJANGO_ALLOW_ASYNC_UNSAFE: set by the browser tests' Playwright fixture, never in a deployment.
    drop = ("SECRET_KEY", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "SPECREG_DATA_DIR": str(data), **extra}


def test_six_processes_starting_at_once_share_one_private_key(tmp_path):
    data = tmp_path / "fresh"
    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    env = _env(data, DJANGO_SETTINGS_MODULE="registry.settings")
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and len(keys.pop()) > 40
    assert stat.S_IMODE((data / "secret_key").stat().st_mode) == 0o600
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert [p.name for p in data.iterdir() if p.name.startswith(".secret_key")] == []  # no temporary left


def test_check_deploy_is_clean_behind_https(tmp_path):
    env = _env(tmp_path / "d", DEBUG="0", SPECREG_HTTPS="1")
    r = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "no issues" in r.stdout, r.stdout + r.stderr


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_without_inline_script(client):
    csp = client.get("/").headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "object-src 'none'" in csp


@pytest.mark.django_db
def test_wrong_passwords_lock_that_account_from_that_client_only(settings):
    User.objects.create_user("admin", password="correct horse battery staple", is_staff=True)
    c = Client(REMOTE_ADDR="10.9.8.7")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        c.post("/accounts/login/", {"username": "admin", "password": "wrong"})
    r = c.post("/accounts/login/", {"username": "admin", "password": "correct horse battery staple"})
    assert r.status_code == 429 and "_auth_user_id" not in c.session  # even the right password waits
    # a stranger's failures do not lock the user out: from their own address the user signs in
    other = Client(REMOTE_ADDR="10.1.1.1")
    r = other.post("/accounts/login/", {"username": "admin", "password": "correct horse battery staple"})
    assert r.status_code == 302 and "_auth_user_id" in other.session


def test_forwarded_addresses_count_only_from_named_proxies(settings):
    rf = RequestFactory()
    spoofed = rf.get("/", REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR="1.2.3.4")
    assert client_ip(spoofed) == "203.0.113.5"
    settings.SPECREG_TRUSTED_PROXIES = ["10.0.0.2"]
    proxied = rf.get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.7")
    assert client_ip(proxied) == "198.51.100.7"  # the proxy appended what it saw; the rest is the client's word
