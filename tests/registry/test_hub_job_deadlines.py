"""One deadline per Hub job: each file's header read has one, and a job of many files (or a Hub listing or search,
whose reads have a timeout per socket read only) must not hold a worker for hours. One deadline per job bounds every
read the job makes, a watchdog ends the one under way, and what was imported before stays.
"""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command

from inspector.hub_api import list_gguf_files, search_models
from inspector.management.base import UserError
from inspector.sources import SourceError
from registry.hub import importing
from registry.hub.importing import JobDeadlinePassed, hub_job_deadline, import_hf
from registry.hub.jobs import execute_job
from registry.models import GGUFFile, HubJob
from tests.ggufgen import vocab, write_gguf
from tests.hub import needs_proc, settles, sockets_to

pytestmark = pytest.mark.db_service


JOB_DEADLINE = 4
REPO = "owner/many-GGUF"
PATHS = ["a.gguf", "b.gguf", "c.gguf"]


@pytest.fixture
def three_files(fake_hub, tmp_path):
    header = write_gguf(tmp_path / "m.gguf", tokens=vocab(2000))  # 25 KB: dripped, it would take hours
    fake_hub.add_repo(REPO, dict.fromkeys(PATHS, header))
    return fake_hub


@needs_proc
def test_an_import_job_ends_at_its_deadline_and_keeps_what_it_imported(three_files, db, settings, monkeypatch):
    settings.SPECREG_HUB_JOB_DEADLINE_SECONDS = JOB_DEADLINE
    real = importing.register

    def register_then_slow_down(*args, **kwargs):
        reg = real(*args, **kwargs)
        three_files.drip_seconds = 0.5  # the first file is in; from now on the server sends a byte at a time
        return reg

    monkeypatch.setattr(importing, "register", register_then_slow_down)
    job = HubJob.objects.create(kind=HubJob.IMPORT_REPO, queue="specreg", params={"repo": REPO})
    started = time.monotonic()
    assert execute_job(job.pk) == "failed"
    assert time.monotonic() - started < JOB_DEADLINE + 10  # does not hang: was hours (a minute per file at the default)
    job.refresh_from_db()
    assert job.error == (
        f"{REPO}: stopped at the job's deadline of {JOB_DEADLINE} s (SPECREG_HUB_JOB_DEADLINE_SECONDS) "
        "after 1 of 3 file(s); what they registered is kept"
    )
    assert job.messages[-1] == {"level": "error", "text": job.error}
    assert [(o["source"], o["status"]) for o in job.result["outcomes"]] == [(f"hf://{REPO}/a.gguf", "added")]
    assert list(GGUFFile.objects.values_list("path", flat=True)) == ["a.gguf"]  # kept
    assert settles(lambda: sockets_to(three_files.cdn_url) == 0)  # the watchdog ended the dripping read
    assert settles(lambda: three_files.dripping == 0)


@needs_proc
def test_a_dripping_hub_listing_ends_at_the_jobs_deadline_and_nothing_starts_after_it(three_files, db, settings):
    settings.SPECREG_HUB_JOB_DEADLINE_SECONDS = JOB_DEADLINE
    three_files.drip_seconds, three_files.drip_api = 0.5, True  # the API's answers too, status line first
    with hub_job_deadline():
        started = time.monotonic()
        with pytest.raises(JobDeadlinePassed) as exc:
            import_hf(REPO)
        assert time.monotonic() - started < JOB_DEADLINE + 10  # does not hang: was one socket read timeout per byte
        assert str(exc.value) == (
            f"hf://{REPO}: the job's deadline of {JOB_DEADLINE} s passed (SPECREG_HUB_JOB_DEADLINE_SECONDS)"
        )
        asked = len(three_files.requests)
        with pytest.raises(SourceError, match="the job's deadline of 4 s passed"):
            search_models(search="many")
        assert len(three_files.requests) == asked  # refused without a request
    assert settles(lambda: sockets_to(three_files.url) == 0)
    assert not GGUFFile.objects.exists()


def test_a_dripping_hub_listing_ends_at_the_header_deadline_outside_a_job(three_files, monkeypatch):
    monkeypatch.setenv("SPECREG_HEADER_DEADLINE_SECONDS", "3")
    three_files.drip_seconds, three_files.drip_api = 0.5, True
    for call in (lambda: list_gguf_files(REPO), lambda: search_models(search="many")):
        started = time.monotonic()
        with pytest.raises(SourceError, match=r"the Hub did not answer within 3 s \(SPECREG_HEADER_DEADLINE_SECONDS\)"):
            call()
        assert time.monotonic() - started < 3 + 10  # does not hang: was HfApi's 30 s per socket read, and no end


def test_the_import_command_shares_one_deadline_too(three_files, db, settings):
    settings.SPECREG_HUB_JOB_DEADLINE_SECONDS = 3
    three_files.drip_seconds = 0.5
    started = time.monotonic()
    with pytest.raises(UserError) as exc:
        call_command("import_hf", REPO)
    assert time.monotonic() - started < 3 + 10  # one deadline for the job: was a minute for the first file alone
    assert str(exc.value) == (
        f"{REPO}: stopped at the job's deadline of 3 s (SPECREG_HUB_JOB_DEADLINE_SECONDS) "
        "after 0 of 3 file(s); what they registered is kept"
    )
