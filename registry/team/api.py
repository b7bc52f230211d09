"""Notes and deployments in the JSON API (DRF views over notes.py and deployments.py, the same
functions and rules as the pages: any account writes a note or records a deployment, only staff give
a deployment's URL, since the server itself then fetches it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from django.db.models import Q, QuerySet
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from registry.models import BenchmarkRun, GGUFFile, Pair
from registry.results.figures import figures_for
from registry.team import deployments as deps
from registry.team import notes as notes_mod
from registry.team.models import Deployment, Note
from registry.team.views import SUBJECTS, deployment_json
from registry.web.api_views import JSON, NOT_FOUND, error


def _json(data: dict, status: int = 200) -> JsonResponse:
    return JsonResponse(data, status=status, json_dumps_params={"ensure_ascii": False})


PAGE_SIZE, PAGE_MAX = 50, 200  # a listed deployment costs a few queries: pages stay bounded
PAGE_PARAMS = [
    OpenApiParameter("limit", int, description=f"rows per page, default {PAGE_SIZE}, at most {PAGE_MAX}"),
    OpenApiParameter("offset", int, description="rows to skip (prefer the next/previous links)"),
]


class ListError(ValueError):
    """A bad query parameter of a list; one line, answered with 400."""


def _number(request: Request, name: str) -> int | None:
    value = request.query_params.get(name, "").strip()
    if not value:
        return None
    # ASCII digits only, and short: int() takes "²" and a thousand digits, the database neither.
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise ListError(f"{name}: expected a whole number, not {value[:40]!r}")
    return int(value)


def _page(request: Request, qs: QuerySet, rows: Callable[[list], list[dict]]) -> JsonResponse:
    """One page of ``qs`` as {count, limit, offset, next, previous, results}; next/previous are links."""
    limit = min(max(_number(request, "limit") or PAGE_SIZE, 1), PAGE_MAX)
    offset = _number(request, "offset") or 0
    count = qs.count()
    items = list(qs[offset : offset + limit])

    def link(at: int) -> str:
        params = request.query_params.copy()
        params["limit"], params["offset"] = str(limit), str(at)
        return f"{request.path}?{params.urlencode()}"

    return _json(
        {
            "count": count,
            "limit": limit,
            "offset": offset,
            "next": link(offset + limit) if offset + limit < count else None,
            "previous": link(max(offset - limit, 0)) if offset > 0 else None,
            "results": rows(items),
        }
    )


DEPLOYMENT_FILTERS = [
    OpenApiParameter("pair", int, description="deployments of this pair (or of its target and draft)"),
    OpenApiParameter("model", int, description="deployments whose target or draft is a file of this model"),
    OpenApiParameter("active", str, enum=["1", "0"], description="1: not retired; 0: retired"),
]


def _deployments(request: Request) -> QuerySet[Deployment]:
    pair_id, model_id = _number(request, "pair"), _number(request, "model")
    if pair_id is not None:
        pair = Pair.objects.filter(pk=pair_id).select_related("target", "draft").first()
        if pair is None:
            return Deployment.objects.none()
        qs = deps.deployments_of(pair=pair)
    else:
        qs = deps.deployments_of()
    if model_id is not None:
        qs = qs.filter(Q(target__model_id=model_id) | Q(draft__model_id=model_id))
    active = request.query_params.get("active", "").strip()
    if active not in ("", "0", "1"):
        raise ListError(f"active: expected 1 or 0, not {active[:40]!r}")
    if active:
        qs = qs.filter(retired_at__isnull=active == "1")
    return qs


class DeploymentView(APIView):
    @extend_schema(
        operation_id="deployment_detail",
        tags=["deployments"],
        responses={200: JSON, 404: NOT_FOUND},
        summary="A deployment with its observed production telemetry and the measured reference",
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        d = get_object_or_404(Deployment.objects.select_related("target__model", "draft__model"), pk=pk)
        return _json(deployment_json(d, request.user))


class DeploymentIn(serializers.Serializer):
    target = serializers.IntegerField(help_text="id of a registered file (/api/files/ID)")
    draft = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="id of a registered file; leave out for none, n-gram methods and draft-mtp",
    )
    method = serializers.CharField(help_text="llama.cpp's --spec-type (draft-simple, ngram-mod, none, …)")
    command = serializers.CharField(help_text="the llama-server command, word for word")
    k = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=1024)
    flags = serializers.CharField(required=False, allow_blank=True, default="")
    host = serializers.CharField(required=False, allow_blank=True, default="")
    url = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="llama-server's base URL, scraped for /metrics: staff only",
    )
    run = serializers.IntegerField(required=False, allow_null=True, help_text="the benchmark run it follows")
    deployed_at = serializers.DateTimeField(required=False, allow_null=True)


class DeploymentsView(APIView):
    @extend_schema(
        operation_id="deployment_list",
        tags=["deployments"],
        parameters=DEPLOYMENT_FILTERS + PAGE_PARAMS,
        responses={200: JSON, 400: JSON},
        summary="Deployments, active first (URL and host for signed-in users only, as on /api/deployments/ID)",
    )
    def get(self, request: Request) -> HttpResponse:
        try:
            qs = _deployments(request)
            user = request.user

            def rows(page: list[Deployment]) -> list[dict]:
                figures = figures_for(sorted({d.pair_id for d in page if d.pair_id is not None}))
                return [deployment_json(d, user, figures) for d in page]

            return _page(request, qs, rows)
        except ListError as exc:
            return error(str(exc), 400)

    @extend_schema(
        operation_id="deployment_create",
        tags=["deployments"],
        request=DeploymentIn,
        responses={201: JSON, 400: JSON, 401: JSON, 403: JSON},
        summary="Record a deployment",
        examples=[
            OpenApiExample(
                "draft model",
                request_only=True,
                value={
                    "target": 12,
                    "draft": 3,
                    "method": "draft-simple",
                    "k": 8,
                    "host": "gpu-3",
                    "command": "llama-server -m target.gguf -md draft.gguf --spec-draft-n-max 8",
                },
            )
        ],
    )
    def post(self, request: Request) -> HttpResponse:
        s = DeploymentIn(data=request.data)
        if not s.is_valid():
            return error(_first_error(s.errors), 400)
        d = s.validated_data
        if d["url"] and not deps.may_set_url(request.user):
            return error("only staff may give a deployment's URL (the server fetches it)", 403)
        # Files by id only, as on the page: registering a new source (a server path, a Hub read) is not
        # something every account may make the server do.
        target = GGUFFile.objects.filter(pk=d["target"]).first()
        draft = GGUFFile.objects.filter(pk=d["draft"]).first() if d.get("draft") is not None else None
        if target is None or (d.get("draft") is not None and draft is None):
            return error(f"no registered file with id {d['target'] if target is None else d['draft']}", 400)
        run = None
        if d.get("run") is not None:
            run = BenchmarkRun.objects.filter(pk=d["run"]).first()
            if run is None:
                return error(f"no benchmark run with id {d['run']}", 400)
        try:
            dep = deps.record(
                deps.DeploymentSpec(
                    target=target,
                    draft=draft,
                    method=d["method"],
                    command=d["command"],
                    k=d.get("k"),
                    flags=d["flags"],
                    host=d["host"],
                    url=d["url"],
                    deployed_at=d.get("deployed_at"),
                    run=run,
                ),
                user=request.user,
            )
        except deps.DeploymentError as exc:
            return error(str(exc), 400)
        dep = Deployment.objects.select_related("target__model", "draft__model").get(pk=dep.pk)
        return _json(deployment_json(dep, request.user), status=201)


def _first_error(errors: dict) -> str:
    return "; ".join(f"{field}: {' '.join(str(e) for e in errs)}" for field, errs in errors.items())


def note_json(n: Note) -> dict:
    kind = notes_mod.subject_field(n.subject)
    return {
        "id": n.pk,
        "subject": {"kind": kind, "id": n.subject.pk, "url": n.subject.get_absolute_url()},
        "body": n.body,
        "html": str(notes_mod.render(n.body)),
        "author": n.author_name,
        "created_at": n.created_at.isoformat(),
        "updated_at": n.updated_at.isoformat(),
        "hidden": n.hidden,
        "url": n.get_absolute_url(),
    }


class NoteIn(serializers.Serializer):
    subject = serializers.ChoiceField(choices=sorted(SUBJECTS), help_text="what the note is on")
    id = serializers.IntegerField(help_text="the model's, file's, pair's or run's id")
    body = serializers.CharField(help_text="Markdown (raw HTML shows as text)", trim_whitespace=False)


NOTE_FILTERS = [
    OpenApiParameter(kind, int, description=f"notes on this {kind} (by its id)") for kind in sorted(SUBJECTS)
]


class NotesView(APIView):
    @extend_schema(
        operation_id="note_list",
        tags=["notes"],
        parameters=NOTE_FILTERS + PAGE_PARAMS,
        responses={200: JSON, 400: JSON},
        summary="Notes, oldest first (hidden ones for staff only)",
    )
    def get(self, request: Request) -> HttpResponse:
        try:
            qs = Note.objects.select_related("model", "file", "pair", "run").order_by("created_at", "pk")
            for kind in SUBJECTS:
                value = _number(request, kind)
                if value is not None:
                    qs = qs.filter(**{f"{kind}_id": value})
            if not notes_mod.may_hide(request.user):
                qs = qs.filter(hidden=False)  # as on /api/notes/ID: hidden notes are staff's alone
            return _page(request, qs, lambda page: [note_json(n) for n in page])
        except ListError as exc:
            return error(str(exc), 400)

    @extend_schema(
        operation_id="note_create",
        tags=["notes"],
        request=NoteIn,
        responses={201: JSON, 400: JSON, 401: JSON, 404: NOT_FOUND},
        summary="Write a note",
        examples=[
            OpenApiExample(
                "on a pair",
                request_only=True,
                value={"subject": "pair", "id": 12, "body": "Acceptance drops below 0.5 on long JSON outputs."},
            )
        ],
    )
    def post(self, request: Request) -> HttpResponse:
        s = NoteIn(data=request.data)
        if not s.is_valid():
            return error(_first_error(s.errors), 400)
        found = get_object_or_404(SUBJECTS[s.validated_data["subject"]], pk=s.validated_data["id"])
        subject = cast(notes_mod.Subject, found)  # one of SUBJECTS' models
        try:
            note = notes_mod.add_note(subject, s.validated_data["body"], request.user)
        except notes_mod.NoteError as exc:
            return error(str(exc), 400)
        return _json(note_json(note), status=201)


class NoteView(APIView):
    @extend_schema(
        operation_id="note_detail",
        tags=["notes"],
        responses={200: JSON, 404: NOT_FOUND},
        summary="A note (hidden ones for staff only)",
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        n = get_object_or_404(Note.objects.select_related("model", "file", "pair", "run"), pk=pk)
        if n.hidden and not notes_mod.may_hide(request.user):
            return error("this note was hidden by staff", 404)
        return _json(note_json(n))
