"""The JSON API as Django REST Framework views: authentication (tokens, sessions), permissions and the
OpenAPI schema come from DRF; every answer is still built by the functions in registry.web.api, so each URL
and field reads exactly as before.

Reads are open to everyone (IsAuthenticatedOrReadOnly, the project default); a write needs a token or a
session (with CSRF) and then the site's own rule for that write (registry.results.reporting.may_report, …).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django.http import HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from registry.models import Pair
from registry.results.reporting import ReportInvalid, ReportNotAllowed, add_reported
from registry.table.request import DEFAULT_VERDICT, VERDICTS
from registry.web import api

JSON = OpenApiResponse(OpenApiTypes.OBJECT, description="JSON object")
NOT_FOUND = OpenApiResponse(OpenApiTypes.OBJECT, description="no such record")


def error(message: str, status: int) -> JsonResponse:
    """Errors in the API's one shape, ``{"error": "..."}`` (as /api/check always answered)."""
    return JsonResponse({"error": message}, status=status, json_dumps_params={"ensure_ascii": False})


TABLE_PARAMS = [
    OpenApiParameter("q", str, description="search text (sources, models, architectures, families, notes)"),
    OpenApiParameter(
        "verdict",
        str,
        enum=list(VERDICTS),
        description="; ".join(f"{k}: {v}" for k, v in VERDICTS.items())
        + f". Default {DEFAULT_VERDICT}; the older 'all' still reads as 'any'; any other value is a 400",
    ),
    OpenApiParameter("content_type", str, description="only pairs with a result of this content type (code, …)"),
    OpenApiParameter("hardware", str, description="only pairs with a result on matching hardware"),
    OpenApiParameter("build", str, description="only pairs with a result under this llama.cpp build"),
    OpenApiParameter("min_speedup", float, description="only pairs with a result at least this fast"),
    OpenApiParameter("method", str, description="only pairs with a result of this --spec-type"),
    OpenApiParameter("sort", str, description="a column, '-' first for descending; default -speedup"),
    OpenApiParameter("page", int, description="page number (read with OFFSET; prefer the next/previous links)"),
    OpenApiParameter("after", str, description="cursor of the next page (from `next`)"),
    OpenApiParameter("before", str, description="cursor of the previous page (from `previous`)"),
    OpenApiParameter(
        "all",
        str,
        enum=["1"],
        description="1: every filtered row, streamed as one JSON object {query, results, count} (no paging)",
    ),
]


class PairsView(APIView):
    @extend_schema(
        operation_id="pairs_list",
        parameters=TABLE_PARAMS,
        responses={200: JSON, 400: JSON},
        summary="The pairs table, one page (next/previous are cursor links) or all=1 streamed",
        tags=["pairs"],
    )
    def get(self, request: Request) -> HttpResponseBase:
        return api.pairs(request)


class PairView(APIView):
    @extend_schema(
        operation_id="pair_detail",
        responses={200: JSON, 404: NOT_FOUND},
        tags=["pairs"],
        summary="A pair: every rule, measured and reported results, the recommended command",
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        return api.pair(request, pk)


class ModelView(APIView):
    @extend_schema(
        operation_id="model_detail",
        tags=["models"],
        parameters=[OpenApiParameter("file", int, description="which of the model's files to detail")],
        responses={200: JSON, 404: NOT_FOUND},
        summary="A model, its files, drafts and targets",
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        return api.model(request, pk)


class FileView(APIView):
    @extend_schema(
        operation_id="file_detail",
        responses={200: JSON, 404: NOT_FOUND},
        tags=["models"],
        summary="A GGUF file's inspected header (metadata, tokenizer)",
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        return api.file(request, pk)


class CheckView(APIView):
    @extend_schema(
        operation_id="check_pair",
        tags=["pairs"],
        responses={200: JSON, 202: JSON, 400: JSON, 429: JSON},
        parameters=[
            OpenApiParameter("target", str, required=True, description="hf://… or a registered file"),
            OpenApiParameter(
                "draft",
                str,
                description="hf://… or a registered file; omitted: what the target can use alone "
                "(`draftless_methods`, as `check_pair TARGET --json` answers)",
            ),
        ],
        summary="Check any two sources with llama.cpp's rules, or a target alone (rate-limited)",
        description="Anonymous checks that read the Hub (an hf:// file not registered) answer 202 "
        "with the queued job (`job`, `url`: its JSON, `page`); the job's `result` is the check.",
    )
    def get(self, request: Request) -> HttpResponse:
        return api.check(request)


class ExamplesView(APIView):
    @extend_schema(
        operation_id="examples",
        tags=["pairs"],
        responses={200: JSON},
        summary="The reported figures shipped for a first start, and the curated repositories",
    )
    def get(self, request: Request) -> HttpResponse:
        return api.examples(request)


class ReportedIn(serializers.Serializer):
    """What POST /api/pairs/ID/reported takes (checked by the pair page's form plus method and speeds)."""

    k = serializers.IntegerField(min_value=0, help_text="draft tokens per step")
    method = serializers.CharField(required=False, default="draft-simple", help_text="llama.cpp's --spec-type")
    acceptance = serializers.FloatField(required=False, allow_null=True, help_text="accepted / drafted, 0–1")
    speedup = serializers.FloatField(required=False, allow_null=True, help_text="speculative ÷ plain t/s")
    tokens_per_second = serializers.FloatField(required=False, allow_null=True)
    baseline_tokens_per_second = serializers.FloatField(required=False, allow_null=True)
    content_type = serializers.CharField(required=False, allow_blank=True)
    hardware = serializers.CharField(required=False, allow_blank=True)
    llama_cpp_build = serializers.CharField(required=False, allow_blank=True)
    citation = serializers.CharField(help_text="where the figures come from")
    source_url = serializers.URLField(required=False, allow_blank=True)
    notes = serializers.CharField(required=False, allow_blank=True)


class ReportedView(APIView):
    """Add a reported result to a pair: staff, or users with the 'add reported result' permission."""

    @extend_schema(
        operation_id="pair_reported_create",
        tags=["pairs"],
        request=ReportedIn,
        responses={201: JSON, 400: JSON, 401: JSON, 403: JSON, 404: NOT_FOUND},
        summary="Add figures measured elsewhere to a pair (shown as reported, never as measured)",
        examples=[
            OpenApiExample(
                "CI result",
                request_only=True,
                value={
                    "k": 8,
                    "method": "draft-simple",
                    "acceptance": 0.71,
                    "speedup": 1.42,
                    "content_type": "code",
                    "hardware": "RTX 4090",
                    "llama_cpp_build": "b11434",
                    "citation": "team CI, job 1234",
                },
            )
        ],
    )
    def post(self, request: Request, pk: int) -> HttpResponse:
        pair = get_object_or_404(Pair, pk=pk)
        data = request.data
        if not hasattr(data, "getlist"):  # JSON: the form wants strings, as a browser would send them
            data = {k: "" if v is None else str(v) for k, v in dict(data).items()}
        try:
            # A form's QueryDict, or the JSON object made a dict of strings just above.
            result = add_reported(pair, cast(Mapping[str, Any], data), request.user)
        except ReportNotAllowed as exc:
            return error(str(exc), 403)
        except ReportInvalid as exc:
            return error(str(exc), 400)
        return JsonResponse(
            {
                "id": result.pk,
                "pair": pair.pk,
                "kind": "reported",
                "k": result.k,
                "method": result.method,
                "acceptance": result.acceptance,
                "speedup": result.speedup,
                "tokens_per_second": result.tokens_per_second,
                "baseline_tokens_per_second": result.baseline_tokens_per_second,
                "content_type": result.content_type,
                "hardware": result.hardware,
                "llama_cpp_build": result.llama_cpp_build,
                "citation": result.citation,
                "source_url": result.source_url,
                "reported_by": request.user.get_username(),
                "pair_url": pair.get_absolute_url(),
            },
            status=201,
            json_dumps_params={"ensure_ascii": False},
        )
