"""The pair page's "Adapt the draft" job: a signed-in user's click, a worker's download of the whole
draft from the Hub, the adapted copy in the model folder within its budget, registered as a model of its own whose
pair with the target is compatible. Real files through the local test Hub; the worker's task is called in place."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from registry.hub.jobs import execute_job
from registry.models import AdaptCheck, BaseModel, GGUFFile, HubJob, Pair
from runner.tasks import adapt_job
from tests.hub_repos import R1
from tests.models import MODELS
from tests.registering import Q05

pytestmark = pytest.mark.django_db


def signed_in(client) -> User:
    user = User.objects.create_user("ada", password="x" * 12)
    client.force_login(user)
    return user


def test_a_signed_in_click_adapts_the_draft_into_a_compatible_pair_of_its_own(client, near_miss, settings):
    page = client.get(near_miss.get_absolute_url()).content.decode()
    assert 'id="adapt-form"' not in page and "to have a worker adapt it here" in page  # anonymous: no button
    assert client.post(f"/pairs/{near_miss.pk}/adapt").status_code == 302 and not HubJob.objects.exists()
    signed_in(client)
    assert 'id="adapt-form"' in client.get(near_miss.get_absolute_url()).content.decode()
    queued = client.post(f"/pairs/{near_miss.pk}/adapt")
    job = HubJob.objects.get()
    assert queued["Location"] == job.get_absolute_url() and job.kind == HubJob.ADAPT_DRAFT
    assert adapt_job(job.pk) == "done"  # what the runner's worker runs
    job.refresh_from_db()
    made_ = GGUFFile.objects.get(pk=job.result["file"])
    out = settings.SPECREG_MODEL_DIR / "adapted" / job.result["path"]
    assert made_.source == str(out.resolve()) and out.is_file()
    assert made_.model.base.rule == BaseModel.RULE_ADAPTED
    pair = Pair.objects.get(pk=job.result["pair"])
    assert pair.compatible and pair.target_base_id == near_miss.target_base_id
    assert Pair.objects.get(pk=near_miss.pk).compatible is False  # the original pair keeps its verdict
    html = client.get(job.get_absolute_url()).content.decode()
    assert f'href="/pairs/{pair.pk}/"' in html and "registered as" in html
    # the original's repository still offers only the original file
    assert list(GGUFFile.objects.filter(model__repo=Q05).values_list("path", flat=True)) == [
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    ]
    # asked again: registered again from the folder, not written again
    mtime = out.stat().st_mtime_ns
    client.post(f"/pairs/{near_miss.pk}/adapt")
    again = HubJob.objects.latest("pk")
    assert adapt_job(again.pk) == "done" and out.stat().st_mtime_ns == mtime
    again.refresh_from_db()
    assert again.result["file"] == made_.pk


def test_past_the_model_folders_budget_it_fails_in_one_line_and_writes_nothing(client, near_miss, settings):
    settings.SPECREG_DISK_BUDGET_BYTES = MODELS["qwen05"].size + 1000  # room for the download, not for the copy
    signed_in(client)
    client.post(f"/pairs/{near_miss.pk}/adapt")
    job = HubJob.objects.get()
    assert adapt_job(job.pk) == "failed"
    job.refresh_from_db()
    assert "disk budget" in job.error and "\n" not in job.error
    assert not list((settings.SPECREG_MODEL_DIR / "adapted").glob("*"))
    assert not GGUFFile.objects.filter(model__base__rule=BaseModel.RULE_ADAPTED).exists()


def test_only_an_adaptable_pair_is_adapted_and_only_by_the_runners_worker(client, near_miss):
    signed_in(client)
    client.get(near_miss.get_absolute_url())  # the page decides (and keeps) whether the pair is adaptable
    assert AdaptCheck.objects.filter(target_id=near_miss.target_id, state=AdaptCheck.ADAPTABLE).exists()
    AdaptCheck.objects.filter(target_id=near_miss.target_id).update(state=AdaptCheck.REFUSED, rule="token_text")
    refused = client.post(f"/pairs/{near_miss.pk}/adapt")
    assert refused.status_code == 303 and refused["Location"] == near_miss.get_absolute_url()
    assert not HubJob.objects.exists()
    AdaptCheck.objects.filter(target_id=near_miss.target_id).update(state=AdaptCheck.ADAPTABLE, rule="")
    client.post(f"/pairs/{near_miss.pk}/adapt")
    job = HubJob.objects.get()
    # the registry's own Hub task cannot download a whole draft: one line, nothing half-done
    assert execute_job(job.pk) == "failed"
    job.refresh_from_db()
    assert "runs in a runner worker" in job.error and not GGUFFile.objects.filter(model__repo="").exists()


def test_an_adapted_draft_never_pairs_with_its_own_original_and_says_where_it_came_from(client, near_miss):
    signed_in(client)
    client.post(f"/pairs/{near_miss.pk}/adapt")
    job = HubJob.objects.get()
    assert adapt_job(job.pk) == "done"
    job.refresh_from_db()
    made_ = GGUFFile.objects.get(pk=job.result["file"])
    original = near_miss.draft
    # no pair of the adapted file with the file it was made from, in either direction (nothing to adapt back)
    assert not Pair.objects.filter(target_base=made_.model.base, draft_base=original.model.base).exists()
    assert not Pair.objects.filter(target_base=original.model.base, draft_base=made_.model.base).exists()
    # the job's verdict is the two files' own, as check_pair gives it
    assert any(m["text"].endswith(", compatible.") for m in job.messages)
    # an original without a sha256 etag (a local file) is still known: this installation adapted it
    GGUFFile.objects.filter(pk=original.pk).update(etag="491400032-1764000000")
    page = client.get(made_.get_absolute_url()).content.decode()
    assert "not registered here" not in page and "this installation adapted it into this file" in page
    assert f'href="{original.get_absolute_url()}"' in page


def test_the_job_adapts_to_the_target_as_it_was_judged_not_as_the_hub_has_it_now(client, near_miss, fake_hub):
    target = near_miss.target
    assert target.commit  # the registration read the target at a commit
    fake_hub.new_commit(R1)  # the target's repository moved on (its header may be anything now)
    signed_in(client)
    client.post(f"/pairs/{near_miss.pk}/adapt")
    job = HubJob.objects.get()
    assert adapt_job(job.pk) == "failed"
    job.refresh_from_db()
    assert target.commit in job.error and "\n" not in job.error.strip()
    assert not GGUFFile.objects.filter(model__base__rule=BaseModel.RULE_ADAPTED).exists()
