"""Pages that queue runs and follow them: benchmarks, predictions, soaks, and the hardware classes' pages."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from inspector.spec_flags import Setting, alone_label, is_draftless, is_option, uses_k
from registry.access.policy import may_see_paths
from registry.models import BenchmarkRun, Pair
from registry.results.recommend import shown_command
from registry.team.models import Deployment
from registry.web.cost_plot import cost_model_svg
from registry.web.plot import latest_soak_svg
from registry.web.serializers import stability_dict
from runner.errors import BenchmarkError
from runner.methods import nothing_drafted
from runner.models import CostMeasurement, KeptTranscript
from runner.predict import conditions, kept, round_cost
from runner.predict.runs import acceptance_apart, drafted_apart, predictions_by_setting
from runner.runs import records, submit
from runner.runs.submit import queue_soak
from runner.soak.targets import parse_duration
from runner.web.forms import BenchmarkForm, SoakForm, form_estimate


def shown_build(build: dict | None, user: Any) -> dict | None:
    """The run's llama.cpp build; where its binaries lie only for those who may see server paths (an operator's
    LLAMA_CPP_BIN_DIR may sit outside the folders the response's own redaction knows)."""
    if not isinstance(build, dict) or may_see_paths(user):
        return build
    return {k: v for k, v in build.items() if k != "bin_dir"}


def run_state(run: BenchmarkRun, user: Any = None) -> dict:
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
        "build": shown_build(run.build, user),
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
        nothing = nothing_drafted(x.method, x.p_min) if x.status == "ok" and not x.speculation_ran else None
        results.append(
            {
                "r": x,
                "predicted": guess,
                "error": error,
                "nothing": nothing,
                "differs": drafted_apart(x, guess),
                "parted": acceptance_apart(x, guess),
            }
        )
    soaks = list(r.soaks.all())
    methods = list(r.params.get("methods") or ["draft-simple"])
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
            # a run of draftless methods measures the target alone: never "X drafting for X"
            "alone": alone_label(methods) if all(is_draftless(m) for m in methods) else None,
            "uses_k": any(uses_k(m) for m in methods),  # the run's K values mean nothing to an n-gram method
            "ngram_too": not all(uses_k(m) for m in methods),
            "took_s": (r.finished_at - r.started_at).total_seconds() if r.finished_at and r.started_at else None,
            "recommendations": [
                {**rec, "setting": recommended_setting(rec)} for rec in r.summary.get("recommendations", [])
            ],
        },
    )


def recommended_setting(rec: dict[str, Any]) -> str:
    """A stored recommendation's setting as the results name it ("ngram-mod K=16 …"): its method with its K, never
    a bare K that would read as a draft model's."""
    if not rec.get("k"):
        return ""
    options = tuple((str(o[0]), str(o[1])) for o in rec.get("options") or () if is_option(o))
    return Setting(str(rec.get("method") or "draft-simple"), int(rec["k"]), rec.get("p_min"), options).label


def run_json(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(run_state(get_object_or_404(BenchmarkRun, pk=pk), request.user))


@login_required
def benchmark(request: HttpRequest, pk: int) -> HttpResponse:
    """The "benchmark this pair" form (GET) and queueing it (POST)."""
    pair = get_object_or_404(Pair.objects.select_related("target__model", "draft__model"), pk=pk)
    form = BenchmarkForm(request.POST if request.method == "POST" else None, pair=pair)
    if request.method == "POST" and form.is_valid():
        try:
            r = submit.queue_benchmark(
                pair,
                form.params(),
                user=request.user,
                hardware=form.cleaned_data["hardware"] or None,
                files=form.chosen_files(),
            )
        except BenchmarkError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Benchmark queued on {r.queue}.")
            return redirect(r)
    status = 400 if form.errors else 200
    context = {"pair": pair, "form": form, "estimate": form_estimate(form)}
    return render(request, "runner/benchmark.html", context, status=status)


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
    dep = get_object_or_404(Deployment, pk=pk)
    return _queue_soak(request, f"deployment:{dep.pk}", dep)


def hardware(request: HttpRequest, name: str) -> HttpResponse:
    """A hardware class: the cost models measured on its machines (verify time against batch size), newest per
    model file and machine, and the transcripts kept for it (runner.predict.kept records both, whoever predicted)."""
    on_class = kept.on_class(name)
    rows = CostMeasurement.objects.filter(on_class).order_by("-created_at", "-pk")[:HARDWARE_COSTS]
    if not rows and not BenchmarkRun.objects.filter(hardware_class=name).exists():
        raise Http404("nothing has been measured on this hardware class")
    latest: dict[tuple[str, str], CostMeasurement] = {}
    rounds: dict[tuple[str, str], dict[str, str]] = {}  # runner.predict.round_cost's records, shown per round
    points: dict[tuple[str, str, str], dict[int, float]] = {}  # per pair: each K's residual per full round
    for c in rows:  # newest first: the first of each model file and machine is its latest
        if "round" not in c.data:
            latest.setdefault((c.model_sha256, c.host), c)
            continue
        per_call, calls = c.data.get("extra_per_call_s"), c.data.get("calls_per_round")
        k = (c.data.get("round") or {}).get("k")
        if isinstance(per_call, (int, float)) and isinstance(calls, int) and isinstance(k, int):
            draft = str(c.data.get("draft") or "its draft")
            shown = {
                "value": f"{per_call * calls * 1000:+.2f} ms at K {k} with {draft}",
                "draft": draft,
                "conditions": conditions.described(c.data.get("conditions")),
                "fit": "",
            }
            rounds.setdefault((c.model_sha256, c.host), shown)
            points.setdefault((c.model_sha256, c.host, draft), {}).setdefault(k, per_call * calls)
    for (sha, host, draft), by_k in points.items():
        line = round_cost.fit(sorted(by_k.items()))
        newest = rounds.get((sha, host))
        if line is not None and newest is not None and newest["draft"] == draft:
            newest["fit"] = f"fitted over K {', '.join(map(str, sorted(by_k)))}: {line.describe()}"
    # Worker host names are the installation's own, shown to those who may see server paths; others see each
    # machine by a number of its own on this page.
    show_hosts = may_see_paths(request.user)
    hosts = sorted({c.host for c in latest.values()})
    alias = {h: (h if show_hosts else f"machine {i}") for i, h in enumerate(hosts, 1)}
    costs: list[dict[str, Any]] = []
    for c in latest.values():
        secs = [float(x) for x in (c.data.get("seconds") or [])]
        label = c.model_name if len(hosts) == 1 else f"{c.model_name} on {alias[c.host]}"
        per_round = rounds.get((c.model_sha256, c.host))
        said = conditions.described(c.data.get("conditions"))
        lo, lo_s = c.data.get("depth_lo"), c.data.get("seconds_lo")
        shallow = f"{lo_s * 1000:.1f} ms at {lo}" if isinstance(lo, int) and isinstance(lo_s, (int, float)) else ""
        costs.append(
            {
                "label": label,
                "row": c,
                "host": alias[c.host],
                "seconds": secs,
                "depth": c.depth,
                "shallow": shallow,
                "round": per_round,
                "conditions": said,
                "disturbed": said.startswith("disturbed"),
            }
        )
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
    state = records.cancel(r.pk)
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
        why = "not available: the run has not finished with a result\n"
        return HttpResponse(why, status=404, content_type="text/plain")
    response = HttpResponse(body, content_type=f"{ctype}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
