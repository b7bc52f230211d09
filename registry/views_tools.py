"""Pages that act: check a pair, inspect a local header, import from the Hub, find drafts."""
from __future__ import annotations

import time
from urllib.parse import unquote

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_POST

from .checking import CheckError, check_sources, local_partners
from .drafts import DraftSearchError, find_drafts
from .examples import import_curated
from .forms import CheckForm, ImportForm
from .header_upload import FIRST_SLICE, UPLOAD_CAP, HeaderError, NeedMore, inspect_prefix
from .hub_import import HubImportError, import_hf
from .models import GGUFFile
from .pages import explained_checks, files_for_datalist, inspection_context


def check(request: HttpRequest) -> HttpResponse:
    form = CheckForm(request.GET or None)
    context = {"form": form, "sources": files_for_datalist()}
    if form.is_valid():
        started = time.monotonic()
        try:
            result, _, _ = check_sources(form.cleaned_data["target"], form.cleaned_data["draft"])
        except CheckError as exc:
            context["error"] = str(exc)
        else:
            context.update(result=result.to_dict(), checks=explained_checks(result.to_dict()),
                           seconds=time.monotonic() - started)
    return render(request, "registry/check.html", context, status=400 if "error" in context else 200)


@ensure_csrf_cookie  # the page posts with fetch(), which needs the cookie even for anonymous users
def local(request: HttpRequest) -> HttpResponse:
    return render(request, "registry/local.html", {"first_slice": FIRST_SLICE, "cap": UPLOAD_CAP})


@require_POST
def local_inspect(request: HttpRequest) -> JsonResponse:
    """Body: the first bytes of a local file. Answers the inspection, or how many bytes are needed."""
    name = unquote(request.headers.get("X-File-Name", ""))[:300] or "local.gguf"
    try:
        total = int(request.headers.get("X-File-Size", ""))
    except ValueError:
        return JsonResponse({"status": "error", "error": "X-File-Size: the file's size in bytes is required"}, status=400)
    data = request.read(UPLOAD_CAP + 1)
    if len(data) > UPLOAD_CAP:
        return JsonResponse({"status": "error", "error": f"more than the {UPLOAD_CAP:,}-byte header cap was sent"}, status=413)
    try:
        info = inspect_prefix(name, data, total)
    except NeedMore as more:
        return JsonResponse({"status": "need_more", "need": more.need, "received": len(data),
                             "message": f"need at least {more.need:,} bytes (received {len(data):,})"})
    except HeaderError as exc:
        return JsonResponse({"status": "error", "error": str(exc)}, status=422)
    partners = local_partners(info)
    d = info.to_dict()
    html = render_to_string("registry/_local_result.html", {
        **inspection_context(d), "partners": partners, "received": len(data)}, request=request)
    return JsonResponse({"status": "ok", "received": len(data), "header_size": info.header_size, "info": d,
                         "partners": [{"source": f.source, "role": role, "compatible": r.compatible,
                                       "failed_rule": r.failed_rule} for f, role, r in partners],
                         "html": html})


@login_required
def import_view(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST or None)
    context: dict = {"form": form}
    if request.method == "POST" and form.is_valid():
        try:
            report = import_hf(form.cleaned_data["repo"], revision=form.cleaned_data["revision"] or None,
                               include=form.cleaned_data["include"])
        except HubImportError as exc:
            context["error"] = str(exc)
        else:
            context["report"] = report
            context["files"] = {f.pk: f for f in GGUFFile.objects.filter(
                pk__in=[o.file_id for o in report.outcomes if o.file_id]).select_related("model")}
    status = 400 if request.method == "POST" and ("error" in context or not form.is_valid()) else 200
    return render(request, "registry/import.html", context, status=status)


@login_required
@require_POST
def import_curated_view(request: HttpRequest) -> HttpResponse:
    reports, errors, unreachable = import_curated()
    if unreachable:
        messages.error(request, f"The Hugging Face Hub cannot be reached from this server ({unreachable}). "
                                "Nothing was imported; try again later, or set HF_ENDPOINT to a mirror.")
    for report in reports:
        messages.success(request, report.summary())
    for repo, error in errors:
        messages.warning(request, f"{repo}: {error}")
    return redirect("home")


@login_required
@require_POST
def find_drafts_view(request: HttpRequest, pk: int) -> HttpResponse:
    f = get_object_or_404(GGUFFile, pk=pk)
    try:
        search = find_drafts(f.source, limit=5)
    except DraftSearchError as exc:
        messages.error(request, str(exc))
        return redirect(f.get_absolute_url())
    if search.hub_error:
        messages.error(request, f"Hub search failed: {search.hub_error}")
    for c in search.hub:
        level = messages.success if c.status == "compatible" else messages.info
        level(request, f"{c.repo_id} ({c.why}): {c.status}" + (f" — {c.message}" if c.message else ""))
    if not search.hub and not search.hub_error:
        messages.info(request, "No new candidate repositories found on the Hub.")
    return redirect(f.get_absolute_url() + "#drafts")


def model_for_file(request: HttpRequest, pk: int) -> HttpResponse:
    return redirect(get_object_or_404(GGUFFile, pk=pk).get_absolute_url())

