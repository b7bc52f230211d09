"""Hub jobs queued through a real broker to a real Celery worker, which imports from the local Hub."""

from __future__ import annotations

import pytest

from registry.hub.queue import queue_job
from registry.models import GGUFFile, HubJob
from runner.models import workers_on
from tests.worker import wait_for

pytestmark = pytest.mark.broker
Q05 = "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"


def test_a_worker_runs_an_import_job_and_records_itself(fake_hub, celery_worker_process, qwen05_header_path, settings):
    # fake_hub comes first: the worker inherits its HF_ENDPOINT.
    fake_hub.add_repo(Q05, {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": qwen05_header_path})
    wait_for(
        lambda: workers_on(settings.CELERY_TASK_DEFAULT_QUEUE),
        60,
        "the worker to record its queues",
        celery_worker_process,
    )
    job = queue_job(HubJob.IMPORT_REPO, {"repo": Q05, "revision": None, "include": None})
    job = wait_for(
        lambda: (j := HubJob.objects.get(pk=job.pk)).finished and j, 120, "the import job", celery_worker_process
    )
    assert job.status == "done", job.error
    assert job.result["outcomes"][0]["status"] == "added" and "1 added" in job.messages[-1]["text"]
    assert GGUFFile.objects.get().repo == Q05
