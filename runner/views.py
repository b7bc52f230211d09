"""Pages and endpoints for benchmark runs: queue, follow live, cancel, download the artifacts."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from registry.models import Pair

from . import runs
from .params import BenchmarkError
from .forms import BenchmarkForm
from registry.models import BenchmarkRun


def run_state(run: BenchmarkRun) -> dict:
    return {
        "id": run.pk, "status": run.status, "progress": run.progress, "message": run.progress_message,
        "finished": run.finished, "error": run.error, "log": run.log[-20000:], "queue": run.queue,
        "created_at": run.created_at.isoformat(), "started_at": run.started_at and run.started_at.isoformat(),
        "finished_at": run.finished_at and run.finished_at.isoformat(), "params": run.params,
        "hardware": run.hardware, "build": run.build, "summary": run.summary,
        "server_command": run.server_command, "pair": run.pair_id,
        "results": [{
            "content_type": r.content_type, "temperature": r.temperature, "k": r.k, "status": r.status,
            "baseline_tokens_per_second": r.baseline_tokens_per_second, "tokens_per_second": r.tokens_per_second,
            "baseline_spread": [r.baseline_min, r.baseline_max], "spread": [r.tps_min, r.tps_max],
            "speedup": r.speedup, "acceptance": r.acceptance, "drafted": r.drafted, "accepted": r.accepted,
            "mean_accepted": r.mean_accepted, "identical": r.identical, "divergences": r.divergences,
            "speculation_ran": r.speculation_ran, "error": r.error, "other_cpu_share": r.other_cpu_share,
        } for r in run.results.all()],
    }


def run(request: HttpRequest, pk: int) -> HttpResponse:
    r = get_object_or_404(BenchmarkRun.objects.select_related("pair__target", "pair__draft"), pk=pk)
    return render(request, "runner/run.html", {"run": r, "results": r.results.all()})


def run_json(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(run_state(get_object_or_404(BenchmarkRun, pk=pk)))


@login_required
def benchmark(request: HttpRequest, pk: int) -> HttpResponse:
    """The "benchmark this pair" form (GET) and queueing it (POST)."""
    pair = get_object_or_404(Pair.objects.select_related("target__model", "draft__model"), pk=pk)
    form = BenchmarkForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            r = runs.queue_benchmark(pair, form.params(), user=request.user,
                                        hardware=form.cleaned_data["hardware"] or None)
        except BenchmarkError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Benchmark queued on {r.queue}.")
            return redirect(r)
    status = 400 if form.errors else 200
    return render(request, "runner/benchmark.html", {"pair": pair, "form": form}, status=status)


@login_required
@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    r = get_object_or_404(BenchmarkRun, pk=pk)
    state = runs.cancel(r.pk)
    messages.info(request, f"Run {r.pk}: {state}.")
    return redirect(r)


def artifact(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    r = get_object_or_404(BenchmarkRun, pk=pk)
    body, filename, ctype = {
        "report": (r.report_md, f"specreg-run-{r.pk}.md", "text/markdown"),
        "unit": (r.systemd_unit, "llama-server.service", "text/plain"),
        "command": (r.server_command + "\n", f"llama-server-run-{r.pk}.sh", "text/plain"),
    }[name]
    if not body.strip():
        return HttpResponse("not available: the run has not finished\n", status=404, content_type="text/plain")
    response = HttpResponse(body, content_type=f"{ctype}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
