"""What a user does in the browser tests: signing in, and a Hub job run behind the page as a worker would."""

from __future__ import annotations

from django.contrib.auth.models import User

from registry.hub.jobs import execute_job

PASSWORD = "correct horse battery staple"


def run_job_behind(page) -> None:
    """The page now shows a queued Hub job: run it as a worker would, and let the page pick up the result."""
    page.wait_for_url("**/jobs/*/")
    execute_job(int(page.url.rstrip("/").rsplit("/", 1)[1]))
    page.goto(page.url)


def log_in(pg, live_server) -> None:
    User.objects.create_user("alice", password=PASSWORD)
    pg.goto(f"{live_server.url}/accounts/login/?next=/import/")
    pg.fill("input[name=username]", "alice")
    pg.fill("input[name=password]", PASSWORD)
    pg.click("main button")
    pg.wait_for_url(f"{live_server.url}/import/")
