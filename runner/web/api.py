"""The runner's part of the JSON API: queueing a prediction of a pair (DRF, so tokens and sessions work as for
every other write; the run is then followed at /api/runs/ID like any benchmark)."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from registry.models import Pair
from registry.web.api_views import JSON, NOT_FOUND, error
from runner.errors import BenchmarkError
from runner.predict import kept
from runner.runs.submit import queue_prediction, queue_soak
from runner.soak.targets import DEFAULT_INTERVAL_S, parse_duration

# What a POST that queues a run answers (the run is then followed at /api/runs/ID).
QUEUED = {202: OpenApiResponse(OpenApiTypes.OBJECT, description="the queued run"), 400: JSON, 401: JSON, 404: NOT_FOUND}


def _invalid(data: serializers.Serializer) -> HttpResponse:
    """A request body that fails its serializer: its first field and why, in one line (400)."""
    first = next(iter(data.errors.items()))
    return error(f"{first[0]}: {' '.join(str(e) for e in first[1])}", 400)


def _queued(run, **more: str) -> JsonResponse:
    return JsonResponse(
        {
            "run": run.pk,
            "status": run.status,
            "queue": run.queue,
            "url": run.get_absolute_url(),
            "api": reverse("api_run", args=[run.pk]),
            **more,
        },  # fmt: skip
        status=202,
    )


class PredictIn(serializers.Serializer):
    ks = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=64), required=False)
    content_types = serializers.ListField(child=serializers.CharField(max_length=32), required=False)
    n_predict = serializers.IntegerField(min_value=8, max_value=4096, required=False)
    prompts_per_type = serializers.IntegerField(min_value=1, max_value=50, required=False)
    hardware = serializers.CharField(required=False, max_length=64, help_text="hardware class queue")


class PredictView(APIView):
    """Queue a prediction of a pair's speedups (no benchmark): signed-in users, within their run limit."""

    @extend_schema(
        operation_id="pair_predict_create",
        tags=["pairs"],
        request=PredictIn,
        responses=QUEUED,
        summary="Predict every setting's acceptance and speedup on a hardware class (temperature 0), queued",
    )
    def post(self, request: Request, pk: int) -> HttpResponse:
        pair = get_object_or_404(Pair.objects.select_related("target", "draft"), pk=pk)
        data = PredictIn(data=request.data)
        if not data.is_valid():
            return _invalid(data)
        params = dict(data.validated_data)
        hardware = params.pop("hardware", None)
        try:
            run = queue_prediction(pair, user=request.user, hardware=hardware, **params)
        except BenchmarkError as exc:
            return error(str(exc), 400)
        return _queued(run, transcripts=kept.transcripts_note(run))


class SoakIn(serializers.Serializer):
    duration = serializers.CharField(max_length=16, required=False, help_text="90s, 30m, 1h (default 1h)")
    clients = serializers.IntegerField(min_value=1, max_value=64, required=False)
    interval = serializers.CharField(max_length=16, required=False, help_text="one record per interval (60s)")
    hardware = serializers.CharField(required=False, max_length=64, help_text="hardware class queue")


class SoakView(APIView):
    """Queue a soak of a pair's best measured setting: signed-in users, within their run limit."""

    @extend_schema(
        operation_id="pair_soak_create",
        tags=["pairs"],
        request=SoakIn,
        responses=QUEUED,
        summary="Soak the pair's best measured llama-server setting under a loop of requests, queued",
    )
    def post(self, request: Request, pk: int) -> HttpResponse:
        pair = get_object_or_404(Pair, pk=pk)
        data = SoakIn(data=request.data)
        if not data.is_valid():
            return _invalid(data)
        v = data.validated_data
        try:
            run = queue_soak(
                f"pair:{pair.pk}",
                duration_s=parse_duration(v.get("duration") or "1h"),
                clients=v.get("clients") or 1,
                interval_s=parse_duration(v.get("interval") or f"{DEFAULT_INTERVAL_S}s"),
                user=request.user,
                hardware=v.get("hardware"),
            )
        except BenchmarkError as exc:
            return error(str(exc), 400)
        return _queued(run)
