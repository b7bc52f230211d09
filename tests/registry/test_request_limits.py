"""Limits on what one user or address may ask of the site, each test reproducing an attack: Hub jobs per user and
in all, deeply nested JSON, lock-outs per username and address together with a throttle per address on both login
forms, and anonymous checks that never take (or echo) a server path.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from registry.hub.sources import register_source
from registry.models import HubJob

pytestmark = pytest.mark.db_service  # CI runs these again on PostgreSQL


@pytest.fixture
def user_client(client, db):
    client.force_login(User.objects.create_user("ann", password="x" * 12))
    return client


# --- Hub jobs ----------------------------------------------------------------------------------


def test_a_user_may_queue_only_a_few_hub_jobs(user_client, settings):
    settings.SPECREG_MAX_ACTIVE_JOBS_PER_USER = 3
    for i in range(3):
        r = user_client.post("/import/", {"repo": f"owner/repo{i}", "revision": "", "include": ""})
        assert r.status_code == 302, r.content[-500:]
    r = user_client.post("/import/", {"repo": "owner/one-too-many", "revision": "", "include": ""})
    assert r.status_code == 429 and b"3 Hub job(s) queued or running" in r.content
    r = user_client.post("/import/curated")
    assert r.status_code == 303  # back to the form, which says why
    assert b"SPECREG_MAX_ACTIVE_JOBS_PER_USER" in user_client.get(r["Location"]).content
    assert HubJob.objects.count() == 3
    HubJob.objects.filter(params__repo="owner/repo0").update(status=HubJob.DONE)  # one finished: room again
    assert user_client.post("/import/", {"repo": "owner/again", "revision": "", "include": ""}).status_code == 302


def test_the_installation_caps_queued_work_for_everyone(client, db, settings):
    settings.SPECREG_MAX_QUEUED_JOBS = 2
    HubJob.objects.bulk_create([HubJob(kind=HubJob.CHECK_PAIR, queue="q") for _ in range(2)])
    r = client.get("/api/check", {"target": "hf://a/b/t.gguf", "draft": "hf://a/b/d.gguf"})
    assert r.status_code == 503 and "SPECREG_MAX_QUEUED_JOBS" in r.json()["error"]
    assert HubJob.objects.count() == 2


# --- nesting ------------------------------------------------------------------------------------


def test_deeply_nested_json_is_a_400_not_a_500(user_client):
    body = "[" * 100_000 + "]" * 100_000
    r = user_client.post("/api/notes", body, content_type="application/json")
    assert r.status_code == 400 and "nested too deeply" in r.json()["error"]
    r = user_client.post(
        "/api/notes",
        json.dumps({"body": "x", "on": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}),
        content_type="application/json",
    )
    assert r.status_code == 400 and "at most 32 levels" in r.json()["error"]


# --- logins -----------------------------------------------------------------------------------


def test_one_address_failing_many_logins_is_throttled_without_locking_anyone_out(db, settings, still_clock):
    settings.SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE = 8
    User.objects.create_user("bob", password="correct horse battery staple")
    office = Client(REMOTE_ADDR="192.0.2.10")
    for i in range(8):  # a guesser behind the office NAT tries many usernames, each below axes' limit
        r = office.post("/accounts/login/", {"username": f"user{i}", "password": "guess"})
        assert r.status_code == 200
    r = office.post("/accounts/login/", {"username": "bob", "password": "correct horse battery staple"})
    assert r.status_code == 429 and b"too many failed logins from this address" in r.content
    # another address is not affected, and bob's account is not locked
    home = Client(REMOTE_ADDR="198.51.100.3")
    r = home.post("/accounts/login/", {"username": "bob", "password": "correct horse battery staple"})
    assert r.status_code == 302 and "_auth_user_id" in home.session


def test_failures_against_one_user_from_one_address_do_not_lock_that_user_out_elsewhere(db, still_clock):
    User.objects.create_user("bob", password="correct horse battery staple")
    stranger = Client(REMOTE_ADDR="192.0.2.66")
    for _ in range(6):  # past AXES_FAILURE_LIMIT (5), below the per-address throttle (30)
        stranger.post("/accounts/login/", {"username": "bob", "password": "guess"})
    r = stranger.post("/accounts/login/", {"username": "bob", "password": "correct horse battery staple"})
    assert "_auth_user_id" not in stranger.session  # the pair (bob, this address) is locked
    bob = Client(REMOTE_ADDR="198.51.100.7")
    r = bob.post("/accounts/login/", {"username": "bob", "password": "correct horse battery staple"})
    assert r.status_code == 302 and "_auth_user_id" in bob.session  # bob himself is not


def test_the_admin_login_form_is_throttled_per_address_like_the_other(db, settings, still_clock):
    settings.SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE = 3
    User.objects.create_user("sam", password="correct horse battery staple", is_staff=True)
    guesser = Client(REMOTE_ADDR="192.0.2.77")
    codes = [
        guesser.post("/admin/login/", {"username": f"staff{i}", "password": "guess"}).status_code for i in range(6)
    ]
    assert codes[3:] == [429, 429, 429], codes  # the admin's form as well as /accounts/login/
    r = guesser.post("/admin/login/", {"username": "sam", "password": "correct horse battery staple"})
    assert r.status_code == 429 and b"too many failed logins from this address" in r.content
    # one count per address, whichever form the failures came through
    assert guesser.post("/accounts/login/", {"username": "sam", "password": "guess"}).status_code == 429
    # another address signs in to the admin as ever, and sam is not locked out
    office = Client(REMOTE_ADDR="198.51.100.8")
    r = office.post("/admin/login/", {"username": "sam", "password": "correct horse battery staple"})
    assert r.status_code == 302 and "_auth_user_id" in office.session


# --- the path oracle ----------------------------------------------------------------------------


def test_anonymous_checks_take_names_and_hub_specs_never_server_paths(client, db, smollm2_path):
    register_source(str(smollm2_path))
    registered = str(smollm2_path)
    unregistered = str(smollm2_path.parent / "no-such-model.gguf")
    answers = []
    for path in (registered, unregistered):
        r = client.get("/api/check", {"target": path, "draft": path})
        answers.append((r.status_code, r.json()))
    assert answers[0] == answers[1] and answers[0][0] == 400  # one answer whether or not it is registered
    assert str(smollm2_path.parent) not in json.dumps(answers[0][1])
    page = client.get("/check/", {"target": registered, "draft": registered})
    assert page.status_code == 400 and smollm2_path.name.encode() not in page.content  # the path is not echoed
    # the name the pages show works
    r = client.get("/api/check", {"target": smollm2_path.name, "draft": smollm2_path.name})
    assert r.status_code == 200 and r.json()["compatible"] is True
    # signed in, paths work as before
    client.force_login(User.objects.create_user("ann", password="x" * 12))
    assert client.get("/api/check", {"target": registered, "draft": registered}).status_code == 200
