"""The model folder against one user filling it: each account's files (adapted drafts, the downloads its runs and
jobs brought in) count against SPECREG_USER_QUOTA_BYTES, the owner or staff remove them, and expire_model_files
removes what nothing refers to once unused for days. Real files through the local test Hub, as the adapt job's and
the downloads' own tests."""

from __future__ import annotations

import io
import os
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from registry.catalog.stored_files import remove
from registry.hub.sources import register_source
from registry.models import BenchmarkResult, BenchmarkRun, GGUFFile, HubJob, Pair, StoredFile
from registry.team.models import Note
from runner.runs.downloads import DownloadError, local_paths
from runner.tasks import adapt_job
from tests.hub_repos import SMOL_SPEC
from tests.models import MODELS

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def account(name: str, staff: bool = False) -> User:
    return User.objects.create_user(name, password="x" * 12, is_staff=staff)


def full(user: User, settings, left: int = 10) -> StoredFile:
    """A file of ``user``'s already in the folder, holding all of their quota but ``left`` bytes."""
    p = settings.SPECREG_MODEL_DIR / "adapted" / f"earlier-{user.username}.gguf"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"GGUF")
    return StoredFile.objects.create(
        path=f"adapted/{p.name}", kind=StoredFile.ADAPTED, size=settings.SPECREG_USER_QUOTA_BYTES - left, owner=user
    )


def adapt(client: Client, pair: Pair) -> HubJob:
    client.post(f"/pairs/{pair.pk}/adapt")
    job = HubJob.objects.latest("pk")
    adapt_job(job.pk)  # what the runner's worker runs
    job.refresh_from_db()
    return job


def test_a_user_past_their_quota_is_refused_an_adapt_job_while_another_users_works(client, near_miss, settings):
    size = MODELS["qwen05"].size
    settings.SPECREG_USER_QUOTA_BYTES = 3 * size
    ada, bob = account("ada"), account("bob")
    full(ada, settings)
    client.force_login(ada)
    job = adapt(client, near_miss)
    assert job.status == "failed" and "SPECREG_USER_QUOTA_BYTES" in job.error and "\n" not in job.error
    assert f"needs {size:,} bytes but only 10 remain" in job.error
    # refused before writing: no adapted copy, and not even the draft's download
    assert [p.name for p in (settings.SPECREG_MODEL_DIR / "adapted").iterdir()] == ["earlier-ada.gguf"]
    assert not (settings.SPECREG_MODEL_DIR / "hub").exists()
    client.force_login(bob)
    job = adapt(client, near_miss)
    assert job.status == "done", job.error
    mine = {s.kind: s for s in StoredFile.objects.filter(owner=bob)}
    out = settings.SPECREG_MODEL_DIR / "adapted" / job.result["path"]
    assert mine["adapted"].path == f"adapted/{out.name}" and mine["adapted"].size == out.stat().st_size
    assert mine["adapted"].file_id == job.result["file"]
    assert mine["download"].size == size and mine["download"].file_id == near_miss.draft_id
    # asked again by ada: adapted before, nothing written, so nothing charged to her; bob still owns it
    client.force_login(ada)
    job = adapt(client, near_miss)
    assert job.status == "done" and StoredFile.objects.get(path=mine["adapted"].path).owner == bob


def test_a_user_past_their_quota_is_refused_a_download_while_another_user_and_staff_are_not(
    hub_with_smollm2,
    settings,
):
    f = register_source(SMOL_SPEC).file
    settings.SPECREG_USER_QUOTA_BYTES = 2 * f.size
    ada, bob, carl = account("ada"), account("bob"), account("carl", staff=True)
    full(ada, settings)
    with pytest.raises(DownloadError, match="SPECREG_USER_QUOTA_BYTES") as exc:
        local_paths(f.source, f.size, f.etag, owner=ada)
    assert "\n" not in str(exc.value) and not (settings.SPECREG_MODEL_DIR / "hub").exists()
    (path,) = local_paths(f.source, f.size, f.etag, owner=bob)  # bob has room
    stored = StoredFile.objects.get(kind=StoredFile.DOWNLOAD)
    assert (stored.owner, stored.size, stored.file) == (bob, f.size, f)
    # A file already in the folder needs no quota (nor room), and is not charged to the next user who reads it.
    assert local_paths(f.source, f.size, f.etag, owner=ada) == [path]
    assert StoredFile.objects.get(kind=StoredFile.DOWNLOAD).owner == bob
    # bob's download removed (the Hub cache's entry and its blob: nothing of it left), staff past the quota still
    # download: their limit is the folder's budget
    assert remove(stored).freed == f.size
    assert (
        not path.exists() and not path.is_symlink() and not list((settings.SPECREG_MODEL_DIR / "hub").rglob("blobs/*"))
    )
    full(carl, settings)
    assert local_paths(f.source, f.size, f.etag, owner=carl) == [path] and path.is_file()
    assert StoredFile.objects.get(kind=StoredFile.DOWNLOAD).owner == carl


def test_the_owner_and_staff_remove_an_adapted_file_others_get_403_and_results_stay(client, near_miss, settings):
    ada, bob, staff = account("ada"), account("bob"), account("sam", staff=True)
    client.force_login(ada)
    job = adapt(client, near_miss)
    assert job.status == "done", job.error
    made_ = GGUFFile.objects.get(pk=job.result["file"])
    pair = Pair.objects.get(pk=job.result["pair"])
    out = settings.SPECREG_MODEL_DIR / "adapted" / job.result["path"]
    stored = StoredFile.objects.get(kind=StoredFile.ADAPTED)
    assert stored.owner == ada and out.is_file()
    run = BenchmarkRun.objects.create(pair=pair, target_file=pair.target, draft_file=made_, queue="q", status="done")
    BenchmarkResult.objects.create(
        run=run, pair=pair, k=4, content_type="code", n_predict=64, repeats=2, n_prompts=1, status="ok"
    )
    url = f"/model-folder/{stored.pk}/remove"
    assert f"adapted/{out.name}" in client.get("/model-folder/").content.decode()
    assert client.get(url).status_code == 405  # a POST only
    # CSRF-protected: a form posted from elsewhere (no token) removes nothing
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(ada)
    assert csrf.post(url).status_code == 403 and out.is_file()
    anonymous = Client()
    assert anonymous.post(url).status_code == 302 and out.is_file()  # to the login page
    client.force_login(bob)
    assert f"adapted/{out.name}" not in client.get("/model-folder/").content.decode()  # not his to see
    assert client.post(url).status_code == 403 and out.is_file()
    client.force_login(ada)
    r = client.post(url, follow=True)
    assert r.redirect_chain == [("/model-folder/", 303)] and "stays registered" in r.content.decode()
    assert not out.exists() and not StoredFile.objects.filter(pk=stored.pk).exists()
    # something refers to it (a result): the registration, its pair and the result stay; only the bytes went
    assert GGUFFile.objects.filter(pk=made_.pk).exists() and Pair.objects.filter(pk=pair.pk).exists()
    assert BenchmarkResult.objects.filter(pair=pair).count() == 1
    # adapted again (nothing refers to it now), staff remove it: it is unregistered and its pairs go with it
    BenchmarkRun.objects.filter(pk=run.pk).delete()
    job = adapt(client, near_miss)
    assert job.status == "done" and out.is_file(), job.error
    again = StoredFile.objects.get(kind=StoredFile.ADAPTED)
    assert again.owner == ada
    client.force_login(staff)
    assert f"adapted/{out.name}" in client.get("/model-folder/").content.decode()  # staff see everyone's
    assert client.post(f"/model-folder/{again.pk}/remove").status_code == 303
    assert not out.exists() and not GGUFFile.objects.filter(source=str(out.resolve())).exists()
    assert not Pair.objects.filter(pk=pair.pk).exists()
    assert Pair.objects.filter(pk=near_miss.pk).exists()  # the original pair is untouched
    assert StoredFile.objects.filter(kind=StoredFile.DOWNLOAD, owner=ada).exists()  # the draft's download stays


def test_expire_model_files_removes_only_old_unreferenced_files_and_nothing_on_a_dry_run(
    near_miss,
    settings,
    tmp_path,
):
    folder = settings.SPECREG_MODEL_DIR
    (folder / "adapted").mkdir(parents=True)
    ada = account("ada")
    old = timezone.now() - timedelta(days=40)

    def stored(rel: str, kind: str = StoredFile.ADAPTED, days: int = 40, file=None, data=b"GGUF" * 10) -> StoredFile:
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        when = timezone.now() - timedelta(days=days)
        return StoredFile.objects.create(
            path=rel, kind=kind, size=len(data), owner=ada, file=file, created_at=when, last_used=when
        )

    def link(rel: str, to) -> None:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(to, folder / rel)

    stored("adapted/old.gguf")  # nothing refers to it: goes
    stored("adapted/recent.gguf", days=3)  # used lately: stays
    # an adapted draft whose pair has a benchmark result: stays
    stored("adapted/measured.gguf", file=near_miss.draft)
    run = BenchmarkRun.objects.create(pair=near_miss, queue="q", status="done")
    BenchmarkResult.objects.create(
        run=run, pair=near_miss, k=4, content_type="code", n_predict=64, repeats=2, n_prompts=1, status="ok"
    )
    # downloads (a Hub cache entry linking to its blob): one a team note names stays; one whose pair has only results
    # goes (the results stay with the registered Hub file; a later run downloads it again)
    stored("hub/models--o--r/blobs/aaa", kind=StoredFile.DOWNLOAD)
    link("hub/models--o--r/snapshots/c1/noted.gguf", folder / "hub/models--o--r/blobs/aaa")
    StoredFile.objects.filter(path="hub/models--o--r/blobs/aaa").update(
        path="hub/models--o--r/snapshots/c1/noted.gguf", file=near_miss.target
    )
    Note.objects.create(file=near_miss.target, body="keep this one", author_name="ada")
    stored("hub/models--o--r/blobs/bbb", kind=StoredFile.DOWNLOAD)
    link("hub/models--o--r/snapshots/c1/measured.gguf", folder / "hub/models--o--r/blobs/bbb")
    StoredFile.objects.filter(path="hub/models--o--r/blobs/bbb").update(
        path="hub/models--o--r/snapshots/c1/measured.gguf", file=near_miss.draft
    )
    # never outside the folder: a link out of it, and a name that climbs out
    outside = tmp_path / "outside.gguf"
    outside.write_bytes(b"mine")
    link("adapted/escape.gguf", outside)
    StoredFile.objects.create(path="adapted/escape.gguf", kind=StoredFile.ADAPTED, size=4, last_used=old)
    StoredFile.objects.create(path="../outside.gguf", kind=StoredFile.ADAPTED, size=4, last_used=old)
    # an adapted draft written before files were recorded, untouched for 60 days: goes
    legacy = folder / "adapted" / "legacy.gguf"
    legacy.write_bytes(b"GGUF")
    os.utime(legacy, (old.timestamp() - 20 * 86400,) * 2)

    def files() -> set[str]:
        return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}

    before, rows = files(), StoredFile.objects.count()
    out = io.StringIO()
    call_command("expire_model_files", "--older-than-days", "30", "--dry-run", stdout=out)
    lines = out.getvalue().splitlines()
    assert files() == before and StoredFile.objects.count() == rows and outside.read_bytes() == b"mine"
    assert sorted(line.split()[3] for line in lines[:-1]) == [
        "adapted/legacy.gguf",
        "adapted/old.gguf",
        "hub/models--o--r/snapshots/c1/measured.gguf",
    ]
    assert (
        lines[0].startswith("would remove ")
        and lines[-1] == "would remove 3 files, 84 bytes, unused for 30 days or more"
    )

    out = io.StringIO()
    call_command("expire_model_files", "--older-than-days", "30", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "removed 3 files, 84 bytes, unused for 30 days or more" and len(lines) == 4
    assert files() == before - {
        "adapted/legacy.gguf",
        "adapted/old.gguf",
        "hub/models--o--r/snapshots/c1/measured.gguf",
        "hub/models--o--r/blobs/bbb",
    }
    assert outside.read_bytes() == b"mine" and (folder / "adapted/escape.gguf").is_symlink()
    assert set(StoredFile.objects.values_list("path", flat=True)) == {
        "adapted/recent.gguf",
        "adapted/measured.gguf",
        "hub/models--o--r/snapshots/c1/noted.gguf",
    }  # the rows of files gone, or out of the folder, are forgotten
    assert GGUFFile.objects.filter(pk=near_miss.draft_id).exists() and BenchmarkResult.objects.count() == 1
