"""Pages that act at once: check a pair, inspect a local header (Hub imports and searches are jobs: hub_jobs)."""

from __future__ import annotations

import shlex
import time
from urllib.parse import unquote

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_POST

from inspector.adapt import adaptability
from registry.access.job_limits import JobLimit
from registry.access.policy import may_see_paths
from registry.access.rate_limits import RateLimited, check_rate, check_upload
from registry.hub.checking import CheckError, CheckTimeout, check_alone, check_sources, local_partners
from registry.hub.queue import queue_if_remote
from registry.models import GGUFFile
from registry.web.forms import CheckForm
from registry.web.header_upload import FIRST_SLICE, HeaderError, NeedMore, inspect_prefix, upload_cap
from registry.web.pages import explained_checks, files_for_datalist, inspection_context


def check(request: HttpRequest) -> HttpResponse:
    form = CheckForm(request.GET or None)
    context = {"form": form, "sources": files_for_datalist(local=may_see_paths(request.user))}
    if form.is_valid():
        started = time.monotonic()
        target, draft = form.cleaned_data["target"], form.cleaned_data["draft"]
        try:
            check_rate(request)
            # An anonymous visitor's check that reads the Hub runs in a worker; its page shows the verdict.
            job = queue_if_remote(target, draft, request.user)
            if job is not None:
                return redirect(job)
            if not draft.strip():  # the target alone, as check_pair TARGET answers
                context.update(alone=check_alone(target, request.user), seconds=time.monotonic() - started)
                return render(request, "registry/check.html", context)
            result, t, d = check_sources(target, draft, request.user)
        except RateLimited as exc:
            return render(request, "registry/check.html", {**context, "error": str(exc)}, status=429)
        except JobLimit as exc:
            return render(request, "registry/check.html", {**context, "error": str(exc)}, status=exc.status)
        except CheckTimeout as exc:  # the Hub was too slow: a gateway timeout, not the visitor's mistake
            return render(request, "registry/check.html", {**context, "error": str(exc)}, status=504)
        except CheckError as exc:
            context["error"] = str(exc)
            if not may_see_paths(request.user):
                # a path is not echoed back to a visitor: the redaction of its folder would confirm it
                keep = {k: v for k, v in form.cleaned_data.items() if v.startswith("hf://") or "/" not in v}
                context["form"] = CheckForm(initial=keep)
        else:
            context.update(
                result=result.to_dict(),
                checks=explained_checks(result.to_dict()),
                adaptable=adaptability(t, d, result),
                adapt_command=shlex.join(["python", "manage.py", "adapt_draft", target, draft, "--output", "OUT.gguf"]),
                seconds=time.monotonic() - started,
            )
    return render(request, "registry/check.html", context, status=400 if "error" in context else 200)


@ensure_csrf_cookie  # the page posts with fetch(), which needs the cookie even for anonymous users
def local(request: HttpRequest) -> HttpResponse:
    return render(request, "registry/local.html", {"first_slice": FIRST_SLICE, "cap": upload_cap(request.user)})


@require_POST
def local_inspect(request: HttpRequest) -> JsonResponse:
    """Body: the first bytes of a local file. Answers the inspection, or how many bytes are needed."""
    cap = upload_cap(request.user)  # anonymous visitors: the public cap, as for their Hub reads
    try:
        check_rate(request, "local")
        if not request.user.is_authenticated:  # weighed before the body is read: what it declares, up to the cap
            check_upload(request, min(_declared_length(request), cap + 1))
    except RateLimited as exc:
        return JsonResponse({"status": "error", "error": str(exc)}, status=429)
    name = unquote(request.headers.get("X-File-Name", ""))[:300] or "local.gguf"
    try:
        total = int(request.headers.get("X-File-Size", ""))
    except ValueError:
        return JsonResponse(
            {"status": "error", "error": "X-File-Size: the file's size in bytes is required"}, status=400
        )
    data = request.read(cap + 1)
    if len(data) > cap:
        return JsonResponse({"status": "error", "error": f"more than the {cap:,}-byte header cap was sent"}, status=413)
    try:
        info = inspect_prefix(name, data, total, cap)
    except NeedMore as more:
        return JsonResponse(
            {
                "status": "need_more",
                "need": more.need,
                "received": len(data),
                "message": f"need at least {more.need:,} bytes (received {len(data):,})",
            }
        )
    except HeaderError as exc:
        return JsonResponse({"status": "error", "error": str(exc)}, status=422)
    partners = local_partners(info)
    d = info.to_dict()
    html = render_to_string(
        "registry/_local_result.html",
        {**inspection_context(d), "partners": partners, "received": len(data)},
        request=request,
    )
    return JsonResponse(
        {
            "status": "ok",
            "received": len(data),
            "header_size": info.header_size,
            "info": d,
            "partners": [
                {"source": f.source, "role": role, "compatible": r.compatible, "failed_rule": r.failed_rule}
                for f, role, r in partners
            ],
            "html": html,
        }
    )


def _declared_length(request: HttpRequest) -> int:
    """The body's Content-Length (Django reads no more than it); 0 when absent or not a number."""
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def model_for_file(request: HttpRequest, pk: int) -> HttpResponse:
    return redirect(get_object_or_404(GGUFFile, pk=pk).get_absolute_url())
