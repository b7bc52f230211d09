"""The registry's Celery tasks, where Celery's autodiscovery looks for them: the Hub's (imports and crawls)
live with the Hub in registry.hub.tasks, the team's in registry.team.tasks (found as an app of its own)."""

from __future__ import annotations

from registry.hub.tasks import crawl_list, crawl_repo, hub_job, sweep_crawls

__all__ = ["crawl_list", "crawl_repo", "hub_job", "sweep_crawls"]
