"""Executing a HubJob: claim it, do the Hub work, record what happened; always leaves it finished.

The Celery task ``runner.tasks.hub_job`` calls ``execute_job``; the registry's functions do the work.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from inspector.hub_names import hub_access
from registry.access.policy import header_cap
from registry.hub.adapting import AdaptJobError, Fetch, run_adapt_job
from registry.hub.checking import CheckError, check_alone, check_sources
from registry.hub.curated import import_curated
from registry.hub.drafts import DraftSearchError, find_drafts
from registry.hub.importing import HubImportError, ImportReport, JobDeadlinePassed, hub_job_deadline, import_hf
from registry.models import HubJob


def execute_job(job_id: int, fetch: Fetch | None = None) -> str:
    """Run a queued job once (a re-delivered task finds it claimed and returns); returns its status. ``fetch``: the
    runner's download, for the kinds that need a whole file (HubJob.RUNNER_KINDS: its task passes it)."""
    if not HubJob.objects.filter(pk=job_id, status=HubJob.QUEUED).update(
        status=HubJob.RUNNING, started_at=timezone.now()
    ):
        return HubJob.objects.filter(pk=job_id).values_list("status", flat=True).first() or "missing"
    job = HubJob.objects.get(pk=job_id)
    notes: list[dict[str, str]] = []

    def say(level: str, text: str) -> None:
        notes.append({"level": level, "text": text})
        HubJob.objects.filter(pk=job_id).update(messages=notes, progress_message=text[:300])

    result: dict[str, Any] = {}
    status, error = HubJob.DONE, ""
    try:
        # The server's token only if the person who asked was allowed it (recorded when queued); every Hub
        # read of the job ends by SPECREG_HUB_JOB_DEADLINE_SECONDS, so a slow Hub cannot hold a worker for long.
        with hub_access(server_token=bool(job.params.get("server_token"))), hub_job_deadline():
            result = _run(job, say, fetch)
    except JobDeadlinePassed as exc:  # what was imported before stays, and the page lists it
        status, error = HubJob.FAILED, str(exc)
        result = _report_dict(exc.report) if exc.report is not None else {}
        say("error", error)
    except (HubImportError, DraftSearchError, CheckError, AdaptJobError) as exc:
        status, error = HubJob.FAILED, str(exc)
        say("error", error)
    except Exception as exc:  # anything unforeseen still ends the job, with a line saying why
        status, error = HubJob.FAILED, f"internal error: {type(exc).__name__}: {exc}"
        say("error", error)
    HubJob.objects.filter(pk=job_id).update(status=status, error=error, result=result, finished_at=timezone.now())
    return status


def _run(job: HubJob, say, fetch: Fetch | None) -> dict[str, Any]:
    if job.kind == HubJob.ADAPT_DRAFT:
        if fetch is None:
            raise AdaptJobError("adapting a draft downloads it: it runs in a runner worker (runner.tasks.adapt_job)")
        return run_adapt_job(job.params, fetch, say, owner=job.requested_by)
    if job.kind == HubJob.IMPORT_REPO:
        report = import_hf(
            job.params["repo"],
            revision=job.params.get("revision") or None,
            include=job.params.get("include") or None,
            cap=header_cap(job.requested_by),  # one cap per person, whichever way in: their checks obey it too
        )
        say("success", report.summary())
        return _report_dict(report)
    if job.kind == HubJob.IMPORT_CURATED:
        _curated(say)
        return {}
    if job.kind == HubJob.FIND_DRAFTS:
        return _drafts(job.params["source"], say)
    if job.kind == HubJob.CHECK_PAIR:
        return _check(job.params["target"], job.params["draft"], say)
    raise HubImportError(f"unknown job kind {job.kind!r}")


def _report_dict(report: ImportReport) -> dict[str, Any]:
    return {
        "repo": report.repo_id,
        "commit": report.commit,
        "summary": report.summary(),
        "outcomes": [
            {
                "source": o.source,
                "status": o.status,
                "message": o.message,
                "file_id": o.file_id,
                "pairs_added": o.pairs_added,
            }
            for o in report.outcomes
        ],
    }


def _curated(say) -> None:
    """Each repository's outcome, said once; the job fails when no repository gave a single file, so "done" always
    means something was imported (a partial import is done, each failed repository's warning among its lines)."""
    reports, errors, unreachable = import_curated(progress=lambda r: _say_report(r, say))
    for repo, error in errors:
        say("warning", f"{repo}: {error}")
    imported = [r for r in reports if _gave_a_file(r)]
    if unreachable:
        why = f"The Hugging Face Hub cannot be reached from this server ({unreachable})."
        if not imported:
            raise HubImportError(f"{why} Nothing was imported; try again later, or set HF_ENDPOINT to a mirror.")
        say("warning", f"{why} Nothing more was imported; try again later, or set HF_ENDPOINT to a mirror.")
    elif not imported:
        tried = len(errors) + len(reports)
        raise HubImportError(
            f"None of the {tried} curated repositories could be imported (each one's reason is above)."
        )


def _gave_a_file(report: ImportReport) -> bool:
    """A repository whose every file failed, or that had none to read, imported nothing."""
    return len(report.failed) < len(report.outcomes)


def _say_report(report: ImportReport, say) -> None:
    if _gave_a_file(report):
        say("success", report.summary())
    else:
        first = f" ({report.failed[0].message})" if report.failed else ""
        say("warning", report.summary() + first)


def _check(target: str, draft: str, say) -> dict[str, Any]:
    # user=None: an anonymous visitor's check, read exactly as check_sources reads for one
    # (no server token, the public header cap); a file that cannot be read fails the job (CheckError).
    if not draft:  # the target alone: check_pair TARGET's answer
        answer = check_alone(target, user=None)
        methods = answer["draftless_methods"]
        say("success" if methods else "warning", f"{target} with no second model: {', '.join(methods) or 'none'}.")
        return answer
    result, _, _ = check_sources(target, draft, user=None)
    if result.compatible:
        say("success", f"Compatible: {draft} can draft for {target}.")
    else:
        detail = next((c.detail for c in result.checks if c.rule == result.failed_rule), "")
        say(
            "warning",
            f"Not usable as a draft: the {result.failed_rule} rule fails" + (f" — {detail}" if detail else "."),
        )
    return result.to_dict()


def _drafts(source: str, say) -> dict[str, Any]:
    search = find_drafts(
        source,
        limit=5,
        progress=lambda c: say(
            "success" if c.status == "compatible" else "info",
            f"{c.repo_id} ({c.why}): {c.status}" + (f" — {c.message}" if c.message else ""),
        ),
    )
    if search.hub_error:
        say("error", f"Hub search failed: {search.hub_error}")
    elif not search.hub:
        say("info", "No new candidate repositories found on the Hub.")
    return {"target_file": search.target.pk, "found": [p.pk for p in search.found]}
