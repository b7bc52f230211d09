"""Crawl pages: start a crawl of an author or a search (staff), follow its progress, cancel or resume it."""

from __future__ import annotations

from dataclasses import asdict

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from registry.hub import crawl as crawls
from registry.models import Crawl, CrawlRepo
from registry.queues import listening_workers

SHOWN = 50  # repositories listed per section of the page; the counts cover all of them


class CrawlForm(forms.Form):
    by = forms.ChoiceField(choices=[(Crawl.AUTHOR, "author"), (Crawl.SEARCH, "search")], label="Crawl by")
    query = forms.CharField(max_length=200, label="Author or search text")
    max_repos = forms.IntegerField(min_value=1, required=False, label="At most (repositories)")


def _may_change(request: HttpRequest, crawl: Crawl | None = None) -> bool:
    user = request.user
    return bool(user.is_staff or (crawl is not None and user.is_authenticated and crawl.requested_by_id == user.pk))


def crawl_list(request: HttpRequest) -> HttpResponse:
    """Recent crawls (GET); starting one (POST, staff only: a crawl may read thousands of repositories)."""
    form = CrawlForm(request.POST or None)
    if request.method == "POST":
        if not request.user.is_staff:
            raise PermissionDenied("only staff may start a crawl")
        if form.is_valid():
            d = form.cleaned_data
            try:
                crawl = crawls.start(d["by"], d["query"], max_repos=d["max_repos"], user=request.user)
            except crawls.CrawlError as exc:
                form.add_error(None, str(exc))
            else:
                return redirect(crawl)
    recent = list(Crawl.objects.all()[:SHOWN])
    rows = [(c, crawls.progress(c)) for c in recent]
    status = 400 if form.errors else 200
    return render(
        request, "registry/crawls.html", {"form": form, "rows": rows, "may_start": request.user.is_staff}, status=status
    )


def _state(crawl: Crawl) -> dict:
    p = crawls.progress(crawl)
    workers = listening_workers()
    waiting = not crawl.finished and workers is not None and not workers(crawl.queue)
    return {
        "id": crawl.pk,
        "by": crawl.by,
        "query": crawl.query,
        "finished": crawl.finished,
        "error": crawl.error,
        "queue": crawl.queue,
        "no_worker": waiting,
        "line": p.line(),
        "finished_repos": p.finished_repos,
        **asdict(p),
    }


def crawl_page(request: HttpRequest, pk: int) -> HttpResponse:
    crawl = get_object_or_404(Crawl, pk=pk)
    rows = CrawlRepo.objects.filter(crawl=crawl)
    context = {
        "crawl": crawl,
        "state": _state(crawl),
        "failed": rows.filter(status=CrawlRepo.FAILED).order_by("repo_id")[:SHOWN],
        "running": rows.filter(status=CrawlRepo.RUNNING).order_by("repo_id")[:SHOWN],
        "recent": rows.filter(status=CrawlRepo.DONE).order_by("-finished_at")[:SHOWN],
        "may_change": _may_change(request, crawl),
    }
    return render(request, "registry/crawl.html", context)


def crawl_json(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(_state(get_object_or_404(Crawl, pk=pk)))


@login_required
@require_POST
def crawl_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, lambda c: f"Crawl {c.pk} {crawls.cancel(c.pk)}.")


@login_required
@require_POST
def crawl_resume(request: HttpRequest, pk: int) -> HttpResponse:
    return _act(request, pk, lambda c: f"Crawl {c.pk} resumed: {crawls.resume(c.pk)} repositories handed out.")


def _act(request: HttpRequest, pk: int, act) -> HttpResponse:
    crawl = get_object_or_404(Crawl, pk=pk)
    if not _may_change(request, crawl):
        raise PermissionDenied("only staff or whoever started the crawl may change it")
    try:
        messages.success(request, act(crawl))
    except crawls.CrawlError as exc:
        messages.error(request, str(exc))
    response = redirect(crawl)
    response.status_code = 303
    return response
