"""Pages for notes and deployments, and a deployment's JSON; thin, over notes.py, deployments.py and telemetry.py."""

from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from registry.access.policy import may_see_paths
from registry.models import BenchmarkRun, GGUFFile, Model, Pair
from registry.queues import listening_workers, telemetry_queue
from registry.team import deployments as deps
from registry.team import notes as notes_mod
from registry.team.forms import DeploymentForm, NoteForm
from registry.team.models import Deployment, Note
from registry.team.plot import observed_svg
from registry.team.scrape_queue import queue_scrape
from registry.team.telemetry import may_see_reasons, observed, series, shown_error, telemetry_state
from registry.web.pages import pair_page, stability_results
from registry.web.plot import latest_soak_svg

SUBJECTS = {"model": Model, "file": GGUFFile, "pair": Pair, "run": BenchmarkRun}


def _forbidden(message: str) -> HttpResponse:
    return HttpResponse(message + "\n", status=403, content_type="text/plain; charset=utf-8")


def subject_url(subject) -> str:
    return subject.get_absolute_url()  # a file's is its model page with ?file=


@login_required
@require_POST
def note_add(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    if kind not in SUBJECTS:
        return HttpResponse("notes are on a model, file, pair or run\n", status=404, content_type="text/plain")
    subject = cast(notes_mod.Subject, get_object_or_404(SUBJECTS[kind], pk=pk))  # one of SUBJECTS' models
    form = NoteForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Note not saved: " + " ".join(str(e) for errs in form.errors.values() for e in errs))
        return redirect(subject_url(subject) + "#notes")
    try:
        note = notes_mod.add_note(subject, form.cleaned_data["body"], request.user)
    except notes_mod.NoteError as exc:
        messages.error(request, f"Note not saved: {exc}")
        return redirect(subject_url(subject) + "#notes")
    return redirect(subject_url(subject) + f"#note-{note.pk}")


def note(request: HttpRequest, pk: int) -> HttpResponse:
    """A note, its earlier versions, and (for its author or staff) the edit form."""
    n = get_object_or_404(Note.objects.select_related("model", "file", "pair", "run"), pk=pk)
    if n.hidden and not notes_mod.may_hide(request.user):
        return HttpResponse("this note was hidden by staff\n", status=404, content_type="text/plain")
    may_edit = notes_mod.may_edit(request.user, n)
    form = NoteForm(initial={"body": n.body}) if may_edit else None
    if request.method == "POST":
        if not may_edit:
            return _forbidden("Only the note's author, or staff, may edit it.")
        form = NoteForm(request.POST)
        if form.is_valid():
            try:
                notes_mod.edit_note(n, form.cleaned_data["body"], request.user)
            except notes_mod.NoteError as exc:
                form.add_error("body", str(exc))
            else:
                messages.success(request, "Note saved; the earlier text is kept in its history.")
                return redirect(n)
    return render(
        request,
        "team/note.html",
        {
            "note": n,
            "html": notes_mod.render(n.body),
            "subject_url": subject_url(n.subject),
            "form": form,
            "versions": [(v, notes_mod.render(v.body)) for v in n.versions.all()[:100]],
            "may_hide": notes_mod.may_hide(request.user),
        },
        status=400 if form is not None and form.errors else 200,
    )


@login_required
@require_POST
def note_hide(request: HttpRequest, pk: int) -> HttpResponse:
    n = get_object_or_404(Note, pk=pk)
    try:
        notes_mod.set_hidden(n, request.POST.get("hidden", "1") == "1", request.user)
    except notes_mod.NoteError as exc:
        return _forbidden(str(exc))
    messages.info(request, f"Note {n.pk} {'hidden' if n.hidden else 'shown again'}.")
    return redirect(subject_url(n.subject) + "#notes")


@login_required
def deployment_new(request: HttpRequest) -> HttpResponse:
    """The "record a deployment" form, filled in from a run (?run=ID) or a pair (?pair=ID)."""
    staff = deps.may_set_url(request.user)
    initial: dict = {}
    if request.GET.get("run", "").isdigit():
        run = get_object_or_404(
            BenchmarkRun.objects.select_related("pair__target", "pair__draft", "pair__check_result"),
            pk=request.GET["run"],
        )
        initial = deps.initial_from_run(run)
    elif request.GET.get("pair", "").isdigit():
        page = pair_page(int(request.GET["pair"]))
        rec = page.recommendation
        initial = deps.initial_from_pair(page.pair, rec.command, rec.k if rec.use_draft else None)
    form = DeploymentForm(request.POST if request.method == "POST" else None, initial=initial, staff=staff)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            spec = deps.DeploymentSpec(
                target=_file(d["target"]),
                draft=_file(d["draft"]) if d["draft"] else None,
                method=d["method"],
                command=d["command"],
                k=d["k"],
                flags=d["flags"],
                host=d["host"],
                url=d.get("url", "") or "",
                run=BenchmarkRun.objects.filter(pk=d["run"]).first() if d["run"] else None,
            )
            dep = deps.record(spec, user=request.user)
        except deps.DeploymentError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Deployment {dep.pk} recorded.")
            return redirect(dep)
    values = form.data if form.is_bound else initial
    target_pk, draft_pk = _int(values.get("target")), _int(values.get("draft"))
    target = GGUFFile.objects.filter(pk=target_pk).select_related("model").first() if target_pk is not None else None
    draft = GGUFFile.objects.filter(pk=draft_pk).select_related("model").first() if draft_pk is not None else None
    if target is None:
        return HttpResponse(
            "Record a deployment from a run's or a pair's page (its target is not known here).\n",
            status=400,
            content_type="text/plain",
        )
    return render(
        request,
        "team/deployment_form.html",
        {"form": form, "target": target, "draft": draft},
        status=400 if form.errors else 200,
    )


def _int(value) -> int | None:
    value = str(value or "")
    return int(value) if value.isdigit() else None


def _file(pk: int) -> GGUFFile:
    f = GGUFFile.objects.filter(pk=pk).first()
    if f is None:
        raise deps.DeploymentError(f"no registered file with id {pk}")
    return f


def deployment(request: HttpRequest, pk: int) -> HttpResponse:
    d = get_object_or_404(Deployment.objects.select_related("target__model", "draft__model", "pair", "run"), pk=pk)
    ref = deps.measured_reference(d)
    obs = observed(d)
    staff = may_see_reasons(request.user)
    samples = list(d.samples.order_by("-scraped_at", "-pk")[:50])
    soaks = stability_results(deployment_ref=d.pk)
    for s in samples:
        s.shown_error = shown_error(s.error, staff=staff)  # type: ignore[attr-defined]  # for the template only; staff read why; everyone else "telemetry unavailable"
    return render(
        request,
        "team/deployment.html",
        {
            "d": d,
            "observed": obs,
            "measured": ref,
            "samples": samples,
            "telemetry": telemetry_state(d, obs, request.user),
            "plot": observed_svg(
                series(d, staff=staff),
                measured_tps=ref.tokens_per_second if ref else None,
                measured_acceptance=ref.acceptance if ref else None,
                title=f"Observed on deployment {d.pk}",
            ),
            "may_retire": deps.may_retire(request.user, d),
            "may_scrape": deps.may_set_url(request.user),
            "show_url": may_see_paths(request.user),
            "scrape_no_worker": staff and _nobody_scrapes(d),
            "soaks": soaks,
            "soak_plot": latest_soak_svg(soaks),
        },
    )


def _nobody_scrapes(d: Deployment) -> str:
    """The telemetry queue's name when a scrape waits on it and no worker listens there (for staff)."""
    if d.scrape_queued_at is None or d.scrape_started_at is not None:
        return ""
    queue = telemetry_queue()
    workers_on = listening_workers()
    return "" if workers_on is None or workers_on(queue) else queue


@login_required
@require_POST
def deployment_retire(request: HttpRequest, pk: int) -> HttpResponse:
    d = get_object_or_404(Deployment, pk=pk)
    try:
        deps.retire(d, user=request.user)
    except deps.DeploymentError as exc:
        if not deps.may_retire(request.user, d):
            return _forbidden(str(exc))
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Deployment {d.pk} retired; it stays on record.")
    return redirect(d)


@login_required
@require_POST
def deployment_scrape(request: HttpRequest, pk: int) -> HttpResponse:
    """Scrape now (staff: the server makes the request), rather than waiting for the beat. Queued for the
    telemetry worker: the request answers at once, however slowly the server would."""
    d = get_object_or_404(Deployment, pk=pk)
    if not deps.may_set_url(request.user):
        return _forbidden("Only staff may make the server scrape a deployment.")
    if not d.url:
        messages.error(request, "This deployment has no URL to scrape.")
        return redirect(d)
    try:
        queued = queue_scrape(d)
    except Exception:  # noqa: BLE001 - the broker is away (its message may hold its URL and password)
        messages.error(request, "Scrape not queued: the task broker did not take it; try again later.")
        return redirect(d)
    if queued:
        messages.info(
            request, "Scrape queued: the telemetry worker reads /metrics; its result shows below once stored."
        )
    else:
        messages.info(request, "A scrape of this deployment is already queued or running.")
    return redirect(d)


def deployment_json(d: Deployment, user, figures: dict | None = None) -> dict:
    """A deployment as JSON; its URL and host only for signed-in users (server paths go the same way).
    ``figures``: its pair's figures_for, when a list has read them for every row at once."""
    private = may_see_paths(user)
    obs = observed(d)
    return {
        "id": d.pk,
        "target": {"id": d.target_id, "source": d.target.source, "model": d.target.model.name},
        "draft": {"id": d.draft_id, "source": d.draft.source, "model": d.draft.model.name} if d.draft else None,
        "pair": d.pair_id,
        "run": d.run_id,
        "method": d.method,
        "k": d.k,
        "flags": d.flags,
        # typed by its author, so it may name hosts and folders: hidden like the host field
        "command": d.command if private else None,
        "host": d.host if private else None,
        "url": d.url if private else None,
        "has_url": bool(d.url),
        "author": d.author_name,
        "deployed_at": d.deployed_at.isoformat(),
        "retired_at": d.retired_at.isoformat() if d.retired_at else None,
        "active": d.active,
        "origin": d.origin_installation or "",
        "observed": obs.to_dict(),  # production traffic; "measured" below is specreg's runner
        # Whether the latest scrape worked and when; why not for staff only, one message for everyone else.
        "telemetry": telemetry_state(d, obs, user),
        "measured": (lambda f: f.to_dict() if f else None)(deps.measured_reference(d, figures)),
    }
