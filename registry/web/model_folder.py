"""The model folder's files a signed-in user's jobs brought in ("My files"): what they hold against the user's quota,
and removing them (the owner, or staff for anyone's). registry.catalog.stored_files does the work."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from registry.catalog.stored_files import FileInUse, may_remove, quota_summary, remove
from registry.models import StoredFile

SHOWN = 500  # rows a page lists (staff see everyone's)


@login_required
def files_page(request: HttpRequest) -> HttpResponse:
    """The user's files (staff: everyone's, theirs first), newest use first, with their quota."""
    user = request.user
    rows = StoredFile.objects.select_related("file", "owner")
    if not user.is_staff:
        rows = rows.filter(owner_id=user.pk)
    used, quota = quota_summary(user)
    return render(
        request,
        "registry/model_folder.html",
        {"rows": list(rows.order_by("-last_used", "pk")[:SHOWN]), "used": used, "quota": quota},
    )


@login_required
@require_POST
def remove_file(request: HttpRequest, pk: int) -> HttpResponse:
    """Remove one file from the model folder: its owner or staff (403 for anyone else)."""
    stored = get_object_or_404(StoredFile.objects.select_related("file"), pk=pk)
    if not may_remove(request.user, stored):
        raise PermissionDenied("only the file's owner or staff may remove it")
    try:
        done = remove(stored)
    except FileInUse as exc:
        messages.error(request, str(exc))
    else:
        text = f"Removed {done.path} ({done.freed:,} bytes freed)"
        if done.unregistered:
            text += "; its registration is gone and its pairs were settled again."
        elif done.kept_because:
            text += f"; it stays registered, with its pairs, because of its {done.kept_because}."
        else:
            text += "."
        messages.success(request, text)
    response = redirect("model_folder")
    response.status_code = 303
    return response
