"""Pages that queue Hub jobs (an import, the curated import, a draft search) and follow them (registry.hub.queue
queues them; a worker runs registry.hub.jobs)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from registry.access.job_limits import JobLimit
from registry.catalog.adaptable import for_pairs
from registry.hub.curated import curated_repos
from registry.hub.queue import queue_job
from registry.models import AdaptCheck, GGUFFile, HubJob, Pair
from registry.queues import listening_workers
from registry.web.forms import ImportForm
from registry.web.pages import explained_checks

RECENT_IMPORTS = 10  # import jobs /import/ lists, newest first


@login_required
def import_view(request: HttpRequest) -> HttpResponse:
    """The import form (GET); queueing the import of a repository (POST)."""
    form = ImportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            job = queue_job(
                HubJob.IMPORT_REPO,
                {"repo": d["repo"], "revision": d["revision"] or None, "include": d["include"]},
                user=request.user,
            )
        except JobLimit as exc:
            form.add_error(None, str(exc))
            return render(request, "registry/import.html", _import_context(form), status=exc.status)
        return redirect(job)
    return render(request, "registry/import.html", _import_context(form), status=400 if form.errors else 200)


def _import_context(form: ImportForm) -> dict:
    """The form, the curated list (offered whatever is registered already: its unchanged files are skipped) and
    the latest import jobs, newest first (by id: the primary key's index, whatever else the jobs table holds)."""
    jobs = HubJob.objects.filter(kind__in=(HubJob.IMPORT_REPO, HubJob.IMPORT_CURATED)).order_by("-pk")
    recent = [(job, import_outcome(job)) for job in jobs[:RECENT_IMPORTS]]
    return {"form": form, "curated": curated_repos(), "recent": recent}


def import_outcome(job: HubJob) -> str:
    """One line for the list of imports: why it failed, the repository's summary, or the curated list's counts."""
    if job.error:
        return job.error
    if not job.finished:
        return job.progress_message or "waiting for a worker"
    if job.result.get("summary"):
        return job.result["summary"]
    levels = [m.get("level") for m in job.messages]
    imported, warned = levels.count("success"), levels.count("warning")
    return f"{imported} repositor{'y' if imported == 1 else 'ies'} imported" + (
        f", {warned} warning{'' if warned == 1 else 's'}" if warned else ""
    )


def _queue_or_refuse(request: HttpRequest, kind: str, params: dict, back: str) -> HttpResponse:
    """The job's page, or back to ``back`` saying which limit refused it (the status says whose)."""
    try:
        return redirect(queue_job(kind, params, user=request.user))
    except JobLimit as exc:
        messages.error(request, str(exc))
        response = redirect(back)
        response.status_code = 303
        return response


@login_required
@require_POST
def import_curated(request: HttpRequest) -> HttpResponse:
    return _queue_or_refuse(request, HubJob.IMPORT_CURATED, {}, "import")


@login_required
@require_POST
def find_drafts(request: HttpRequest, pk: int) -> HttpResponse:
    f = get_object_or_404(GGUFFile, pk=pk)
    return _queue_or_refuse(request, HubJob.FIND_DRAFTS, {"source": f.source, "file": f.pk}, f.get_absolute_url())


@login_required
@require_POST
def adapt_draft(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue the adaptation of an adaptable pair's draft (registry.hub.adapting): the files are the two the pair
    shows, the output goes to the model folder, and the per-user job limits hold."""
    pair = get_object_or_404(Pair, pk=pk)
    check = for_pairs([pair]).get(pair.pk)  # decided now if no page has shown it yet
    if check is None or check.state != AdaptCheck.ADAPTABLE:
        messages.error(request, "This pair's draft is not adaptable (see the pair page for why).")
        response = redirect(pair)
        response.status_code = 303
        return response
    params = {
        "target": pair.target_id,
        "draft": pair.draft_id,
        "pair": pair.pk,
        "target_source": pair.target.source,
        "draft_source": pair.draft.source,
    }
    return _queue_or_refuse(request, HubJob.ADAPT_DRAFT, params, pair.get_absolute_url())


def job_state(job: HubJob) -> dict:
    workers = listening_workers()
    waiting = job.status == HubJob.QUEUED and workers is not None and not workers(job.queue)
    return {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "finished": job.finished,
        "message": job.progress_message,
        "messages": job.messages,
        "result": job.result,
        "error": job.error,
        "queue": job.queue,
        "no_worker": waiting,
        "created_at": job.created_at.isoformat(),
        "finished_at": job.finished_at and job.finished_at.isoformat(),
    }


def hub_job(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(HubJob, pk=pk)
    files = {}
    if job.kind == HubJob.IMPORT_REPO and job.result.get("outcomes"):
        ids = [o["file_id"] for o in job.result["outcomes"] if o.get("file_id")]
        files = {f.pk: f for f in GGUFFile.objects.filter(pk__in=ids).select_related("model")}
    back = None
    if job.kind == HubJob.FIND_DRAFTS:
        back = GGUFFile.objects.filter(pk=job.params.get("file")).first()
    checks = explained_checks(job.result) if job.kind == HubJob.CHECK_PAIR else []
    return render(
        request,
        "registry/hub_job.html",
        {"job": job, "state": job_state(job), "files": files, "back": back, "checks": checks},
    )


def hub_job_json(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(job_state(get_object_or_404(HubJob, pk=pk)))
