"""The Hub's Celery tasks: thin wrappers that pass a HubJob id to registry.hub.jobs, a crawl's ids to
registry.hub.crawl. Imported by registry.tasks, where Celery's autodiscovery looks.

hub_job's registered name is ``runner.tasks.hub_job``, whatever module defines it: a task's name is part of the
messages on the broker, so it never changes with the code's layout and messages already queued find it.
"""

from __future__ import annotations

import time

from celery import shared_task

from registry.hub import crawl
from registry.hub.jobs import execute_job


@shared_task(name="runner.tasks.hub_job", acks_late=True, ignore_result=True)
def hub_job(job_id: int) -> str:
    return execute_job(job_id)


@shared_task(name="registry.tasks.crawl_list", acks_late=True, ignore_result=True)
def crawl_list(crawl_id: int) -> str:
    return crawl.list_step(crawl_id)


@shared_task(name="registry.tasks.crawl_repo", bind=True, acks_late=True, ignore_result=True, max_retries=None)
def crawl_repo(self, row_id: int) -> str:
    # A place for the host frees within seconds: waited for here, where a retry would sit in this worker's memory.
    waited = 0.0
    while (status := crawl.repo_step(row_id)) == "wait" and waited < crawl.lease().total_seconds():
        time.sleep(crawl.WAIT_SECONDS)
        waited += crawl.WAIT_SECONDS
    if status in ("wait", "retry"):  # the Hub did not answer (or no place freed): the same message, later
        raise self.retry(countdown=30 * (self.request.retries + 1))
    return status


@shared_task(name="registry.tasks.sweep_crawls", ignore_result=True)
def sweep_crawls() -> int:
    return crawl.sweep()
