"""Pages that queue background work and follow it: benchmark runs and Hub jobs (imports, draft searches)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from registry.access.job_limits import JobLimit
from registry.access.policy import may_see_paths
from registry.hub.queue import queue_job
from registry.models import BenchmarkRun, GGUFFile, HubJob, Pair
from registry.results.recommend import shown_command
from registry.web.cost_plot import cost_model_svg
from registry.web.forms import ImportForm
from registry.web.pages import explained_checks
from registry.web.plot import latest_soak_svg
from registry.web.serializers import stability_dict

from . import kept, runs, submit
from .forms import BenchmarkForm, SoakForm
from .models import CostMeasurement, KeptTranscript, workers_on
from .params import BenchmarkError
from .predicting import predictions_by_setting


def run_state(run: BenchmarkRun) -> dict:
    return {
        "id": run.pk,
        "status": run.status,
        "progress": run.progress,
        "message": run.progress_message,
        "finished": run.finished,
        "error": run.error,
        "log": run.log[-20000:],
        "queue": run.queue,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at and run.started_at.isoformat(),
        "finished_at": run.finished_at and run.finished_at.isoformat(),
        "params": run.params,
        "hardware": run.hardware,
        "build": run.build,
        "summary": run.summary,
        "server_command": shown_command(run)[0],
        "pair": run.pair_id,
        "results": [
            {
                "content_type": r.content_type,
                "temperature": r.temperature,
                "k": r.k,
                "status": r.status,
                "method": r.method,
                "p_min": r.p_min,
                "options": r.options,
                "via": r.via,
                "baseline_tokens_per_second": r.baseline_tokens_per_second,
                "tokens_per_second": r.tokens_per_second,
                "baseline_spread": [r.baseline_min, r.baseline_max],
                "spread": [r.tps_min, r.tps_max],
                "speedup": r.speedup,
                "acceptance": r.acceptance,
                "drafted": r.drafted,
                "accepted": r.accepted,
                "mean_accepted": r.mean_accepted,
                "identical": r.identical,
                "divergences": r.divergences,
                "speculation_ran": r.speculation_ran,
                "error": r.error,
                "other_cpu_share": r.other_cpu_share,
                "clients": r.clients,
                "parallel": r.parallel,
                "latency_p50": r.latency_p50,
                "latency_p95": r.latency_p95,
                "baseline_latency_p95": r.baseline_latency_p95,
                "ttft_p50": r.ttft_p50,
                "differing_share": r.differing_share,
                "prompt_repeats": r.prompt_repeats,
                "speedup_range": [r.speedup_min, r.speedup_max],
                "pairs": r.pairs,
            }
            for r in run.results.all()
        ],
        "stability": [stability_dict(s) for s in run.soaks.all()],
    }


def run(request: HttpRequest, pk: int) -> HttpResponse:
    r = get_object_or_404(BenchmarkRun.objects.select_related("pair__target", "pair__draft"), pk=pk)
    predicted = predictions_by_setting(r)
    results = []
    for x in r.results.all():  # each measured setting beside its prediction (temperature 0 only)
        guess = predicted.get((x.content_type, x.setting_label)) if x.temperature == 0 else None
        error = None
        if guess is not None and guess.speedup is not None and x.speedup:
            error = 100 * (guess.speedup - x.speedup) / x.speedup
        results.append({"r": x, "predicted": guess, "error": error})
    soaks = list(r.soaks.all())
    return render(
        request,
        "runner/run.html",
        {
            "run": r,
            "results": results,
            "predictions": sorted(predicted.values(), key=lambda x: (x.content_type, -(x.speedup or 0))),
            "may_cancel": may_cancel(request.user, r),
            "show_worker": may_see_paths(request.user),  # host:pid names this installation's machines
            "command": shown_command(r)[0],
            "soaks": soaks,
            "soak_plot": latest_soak_svg(soaks),
        },
    )


def run_json(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(run_state(get_object_or_404(BenchmarkRun, pk=pk)))


@login_required
def benchmark(request: HttpRequest, pk: int) -> HttpResponse:
    """The "benchmark this pair" form (GET) and queueing it (POST)."""
    pair = get_object_or_404(Pair.objects.select_related("target__model", "draft__model"), pk=pk)
    form = BenchmarkForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            r = submit.queue_benchmark(
                pair, form.params(), user=request.user, hardware=form.cleaned_data["hardware"] or None
            )
        except BenchmarkError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Benchmark queued on {r.queue}.")
            return redirect(r)
    status = 400 if form.errors else 200
    return render(request, "runner/benchmark.html", {"pair": pair, "form": form}, status=status)


@login_required
@require_POST
def predict(request: HttpRequest, pk: int) -> HttpResponse:
    """The pair page's "Predict" button: queue a prediction run and follow it on its page."""
    pair = get_object_or_404(Pair.objects.select_related("target", "draft"), pk=pk)
    try:
        r = submit.queue_prediction(pair, user=request.user)
    except BenchmarkError as exc:
        messages.error(request, str(exc))
        return redirect(pair)
    messages.success(request, f"Prediction queued on {r.queue}. {kept.transcripts_note(r)}")
    return redirect(r)


def _queue_soak(request: HttpRequest, ref: str, back) -> HttpResponse:
    """The "Soak test" buttons: queue a soak of ``ref`` and follow it on its run page."""
    from .soaking import parse_duration, queue_soak

    form = SoakForm(request.POST)
    if not form.is_valid():  # a duration of 20,000 characters stops here, before any pattern reads it
        messages.error(request, form.first_error())
        return redirect(back)
    try:
        r = queue_soak(
            ref,
            duration_s=parse_duration(form.cleaned_data["duration"] or "1h"),
            clients=form.cleaned_data["clients"] or 1,
            user=request.user,
        )
    except BenchmarkError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    messages.success(request, f"Soak queued on {r.queue}; it occupies that worker until it ends.")
    return redirect(r)


@login_required
@require_POST
def soak(request: HttpRequest, pk: int) -> HttpResponse:
    pair = get_object_or_404(Pair, pk=pk)
    return _queue_soak(request, f"pair:{pair.pk}", pair)


@login_required
@require_POST
def soak_deployment(request: HttpRequest, pk: int) -> HttpResponse:
    from registry.team.models import Deployment

    dep = get_object_or_404(Deployment, pk=pk)
    return _queue_soak(request, f"deployment:{dep.pk}", dep)


def hardware(request: HttpRequest, name: str) -> HttpResponse:
    """A hardware class: the cost models measured on its machines (verify time against batch size), newest per
    model file and machine, and the transcripts kept for it (runner.kept records both, whoever predicted)."""
    on_class = kept.on_class(name)
    rows = CostMeasurement.objects.filter(on_class).order_by("-created_at", "-pk")[:HARDWARE_COSTS]
    if not rows and not BenchmarkRun.objects.filter(hardware_class=name).exists():
        raise Http404("nothing has been measured on this hardware class")
    latest: dict[tuple[str, str], CostMeasurement] = {}
    for c in rows:  # newest first: the first of each model file and machine is its latest
        latest.setdefault((c.model_sha256, c.host), c)
    # Worker host names are the installation's own, shown to those who may see server paths; others see each
    # machine by a number of its own on this page.
    show_hosts = may_see_paths(request.user)
    hosts = sorted({c.host for c in latest.values()})
    alias = {h: (h if show_hosts else f"machine {i}") for i, h in enumerate(hosts, 1)}
    costs: list[dict[str, Any]] = []
    for c in latest.values():
        secs = [float(x) for x in (c.data.get("seconds") or [])]
        label = c.model_name if len(hosts) == 1 else f"{c.model_name} on {alias[c.host]}"
        costs.append({"label": label, "row": c, "host": alias[c.host], "seconds": secs, "depth": c.depth})
    costs.sort(key=lambda c: c["label"])
    transcripts = (
        KeptTranscript.objects.filter(on_class)
        .values("model_name", "hardware_class", "build")
        .annotate(n=Count("pk"), last=Max("created_at"))
        .order_by("model_name", "hardware_class")
    )
    return render(
        request,
        "runner/hardware.html",
        {
            "name": name,
            "costs": costs,
            "plot": cost_model_svg({c["label"]: c["seconds"] for c in costs}, f"Verify cost on {name}"),
            "transcripts": list(transcripts),
        },
    )


HARDWARE_COSTS = 200  # the newest cost models a hardware page reads


def may_cancel(user, run: BenchmarkRun) -> bool:
    """Only the user who queued a run, or staff, may cancel it."""
    return user.is_authenticated and (user.is_staff or run.requested_by_id == user.pk)


@login_required
@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    r = get_object_or_404(BenchmarkRun, pk=pk)
    if not may_cancel(request.user, r):
        return HttpResponse(
            "Only the user who queued this run, or staff, may cancel it.\n", status=403, content_type="text/plain"
        )
    state = runs.cancel(r.pk)
    messages.info(request, f"Run {r.pk}: {state}.")
    return redirect(r)


def artifact(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    r = get_object_or_404(BenchmarkRun, pk=pk)
    command, unit = shown_command(r)  # an imported run's are rebuilt here, never its own text
    body, filename, ctype = {
        "report": (r.report_md, f"specreg-run-{r.pk}.md", "text/markdown"),
        "unit": (unit, "llama-server.service", "text/plain"),
        "command": (command + "\n", f"llama-server-run-{r.pk}.sh", "text/plain"),
    }[name]
    if not body.strip():
        return HttpResponse("not available: the run has not finished\n", status=404, content_type="text/plain")
    response = HttpResponse(body, content_type=f"{ctype}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# --- Hub jobs ------------------------------------------------------------------------------------


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
            return render(request, "runner/import.html", {"form": form}, status=exc.status)
        return redirect(job)
    return render(request, "runner/import.html", {"form": form}, status=400 if form.errors else 200)


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


def job_state(job: HubJob) -> dict:
    waiting = job.status == HubJob.QUEUED and not workers_on(job.queue)
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
        "runner/hub_job.html",
        {"job": job, "state": job_state(job), "files": files, "back": back, "checks": checks},
    )


def hub_job_json(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(job_state(get_object_or_404(HubJob, pk=pk)))
