"""The read-only JSON API: the same data every page shows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict

from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponsePermanentRedirect,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404
from django.urls import reverse

from inspector.adapt import adaptability
from registry.access.job_limits import JobLimit
from registry.access.policy import may_see_paths
from registry.access.rate_limits import RateLimited, check_rate
from registry.hub.checking import CheckError, CheckTimeout, check_alone, check_sources
from registry.hub.curated import curated_repos
from registry.hub.queue import queue_if_remote
from registry.models import AdaptCheck, GGUFFile
from registry.results.examples import reported_examples
from registry.results.predicted import Comparison
from registry.table.menus import facets
from registry.table.pages import iter_rows, page_of
from registry.table.request import TableQuery, TableQueryError
from registry.web.pages import merged_into, model_page, pair_page, tokenizer_view
from registry.web.serializers import file_ref, model_summary, pair_row, stability_dict, unlisted_ref


def _json(data: object, status: int = 200) -> JsonResponse:
    return JsonResponse(data, status=status, safe=False, json_dumps_params={"ensure_ascii": False})


def pairs(request: HttpRequest) -> HttpResponseBase:
    """A page of the table (``next``/``previous`` are cursor links), or with ``all=1`` every row, streamed."""
    try:
        # The search matches server paths only for a viewer who may see them (registry.table.filters.shown_search).
        tq = TableQuery.from_params(request.GET, search_paths=may_see_paths(request.user))
    except TableQueryError as exc:
        return _json({"error": str(exc)}, status=400)
    if request.GET.get("all") == "1":
        return StreamingHttpResponse(_all_pairs(tq), content_type="application/json")
    page, rows = page_of(tq)
    path = request.path
    return _json(
        {
            "query": asdict(tq),
            "count": page.count,
            "count_exact": page.count_exact,
            "page": page.number,
            "num_pages": page.num_pages,
            "results": [pair_row(r.pair, r.best) for r in rows],
            "next": path + page.next_query if page.has_next else None,
            "previous": path + page.previous_query if page.has_previous else None,
            "facets": facets(),
            "first_start": not GGUFFile.objects.exists(),
        }
    )


def _all_pairs(tq: TableQuery) -> Iterator[str]:
    # One JSON object, written as the keyset chunks arrive; the exact count comes last, once known.
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    yield '{"query": ' + dumps(asdict(tq)) + ', "results": ['
    n = 0
    for chunk in iter_rows(tq):
        for r in chunk:
            yield (", " if n else "") + dumps(pair_row(r.pair, r.best))
            n += 1
    yield f'], "count": {n}}}'


def predicted_dict(c: Comparison) -> dict:
    """A predicted figure with what it was predicted from, and the measurement of its setting when there is one."""
    x = c.predicted.obj
    return {
        **c.predicted.to_dict(),
        "setting": c.setting,
        "p_min": x.p_min,
        "drafted": x.drafted,
        "accepted": x.accepted,
        "near_ties": x.near_ties,
        "task_set": x.task_set,
        "n_predict": x.n_predict,
        "hardware_class": x.hardware_class,
        "temperature": 0.0,
        "measured": None
        if c.measured is None
        else {"acceptance": c.measured.acceptance, "speedup": c.measured.speedup, "texts_parted": c.texts_parted},
        "speedup_error_pct": c.speedup_error,
        "acceptance_error_points": c.acceptance_error,
    }


def pair(request: HttpRequest, pk: int) -> HttpResponse:
    if (moved := merged_into(pk)) is not None:  # an old id: the pair of files is now a pair of base models
        return HttpResponsePermanentRedirect(reverse("api_pair", args=[moved]))
    page = pair_page(pk)
    rec = page.recommendation
    return _json(
        {
            **pair_row(page.pair),
            "checks": page.checks,
            # Every file's own verdict: each side's files by tokenizer class, and each combination of classes.
            "target_classes": page.target_classes,
            "draft_classes": page.draft_classes,
            "combinations": [c.to_dict() for c in page.combinations.combos] if page.combinations else [],
            "warnings": page.pair.result.get("warnings", []),
            "first_mismatch": page.pair.result.get("first_mismatch"),
            # Whether adapt_draft could make the draft acceptable, and what it would change (null: not a near-miss)
            "adaptability": adaptability_dict(page.adaptability),
            "measured": [f.to_dict() for f in page.measured],
            "reported": [f.to_dict() for f in page.reported],
            "predicted": [predicted_dict(c) for c in page.predicted],
            # Every prediction run of the pair; "chosen": the one its Predicted column shows per hardware class
            # (the newest build's largest, prompts x tokens).
            "prediction_runs": [
                {
                    "run": x.run_id,
                    "hardware_class": x.hardware_class,
                    "llama_cpp_build": x.llama_cpp_build,
                    "n_prompts": x.n_prompts,
                    "n_predict": x.n_predict,
                    "task_set": x.task_set,
                    "created_at": x.created_at,
                    "chosen": x.chosen,
                }
                for x in page.prediction_runs
            ],
            "build_changes": [c.to_dict() for c in page.history],
            # Soaks of the pair's setting (manage.py soak), newest first: a measured figure of its own kind.
            "stability": [stability_dict(s) for s in page.stability],
            "verdict_changes": [
                {
                    "old_compatible": v.old_compatible,
                    "new_compatible": v.new_compatible,
                    "old_failed_rule": v.old_failed_rule,
                    "new_failed_rule": v.new_failed_rule,
                    "old_rules_from": v.old_rules_from,
                    "new_rules_from": v.new_rules_from,
                    "changed_at": v.changed_at,
                }
                for v in page.verdict_changes
            ],
            "recommendation": {
                "use_draft": rec.use_draft,
                "k": rec.k,
                "basis": rec.basis,
                "command": rec.command,
                "download": rec.download,
            },
        }
    )


def adaptability_dict(row: AdaptCheck | None) -> dict | None:
    """The stored decision in full: adaptable (with the whole plan), refused (with the rule), or unknown."""
    if row is None:
        return None
    return {"state": row.state, "rule": row.rule or None, "detail": row.detail, "plan": row.plan}


def model(request: HttpRequest, pk: int) -> JsonResponse:
    page = model_page(pk, request.GET.get("file"))
    return _json(
        {
            **model_summary(page.model),
            "files": [
                file_ref(f) | {"size": f.size, "commit": f.commit, "split_count": f.split_count} for f in page.files
            ],
            "file": file_detail(page.file),
            "drafts": [pair_row(p) for p in page.drafts],
            "targets": [pair_row(p) for p in page.targets],
            # Compatible base models with no listed pair (registry.catalog.listing), one file of each to check with.
            "more_drafts": [unlisted_ref(bc) for bc in page.more_drafts],
            "more_targets": [unlisted_ref(bc) for bc in page.more_targets],
            "base_model": None
            if page.base is None
            else {
                "name": page.base.base.name,
                "key": page.base.base.key,
                "rule": page.base.base.rule,
                "quants": page.base.quants,
                "repositories": [
                    {"id": r.model.pk, "repo": r.model.repo, "name": r.model.name, "quants": r.quants}
                    for r in page.base.repositories
                ],
            },
        }
    )


def file_detail(f: GGUFFile) -> dict:
    return file_ref(f) | {
        "size": f.size,
        "etag": f.etag,
        "commit": f.commit,
        "revision": f.revision,
        "inspected_at": f.inspected_at.isoformat(),
        "info": f.info,
        "tokenizer_view": tokenizer_view(f.info),
    }


def file(request: HttpRequest, pk: int) -> JsonResponse:
    return _json(file_detail(get_object_or_404(GGUFFile.objects.select_related("model"), pk=pk)))


def check(request: HttpRequest) -> JsonResponse:
    """The check (of the target alone when no draft is named), or for an anonymous visitor's check that reads the
    Hub, 202 and the job doing it."""
    target, draft = request.GET.get("target", ""), request.GET.get("draft", "")
    try:
        check_rate(request)
        job = queue_if_remote(target, draft, request.user)
        if job is not None:
            return _json(
                {
                    "status": "queued",
                    "job": job.pk,
                    "url": reverse("api_hub_job", args=[job.pk]),
                    "page": job.get_absolute_url(),
                },
                status=202,
            )
        if not draft.strip():  # the target alone: check_pair TARGET --json's answer
            return _json(check_alone(target, request.user))
        result, t, d = check_sources(target, draft, request.user)
    except RateLimited as exc:
        return _json({"error": str(exc)}, status=429)
    except JobLimit as exc:
        return _json({"error": str(exc)}, status=exc.status)
    except CheckTimeout as exc:  # the Hub was too slow: a gateway timeout, not the caller's mistake
        return _json({"error": str(exc)}, status=504)
    except CheckError as exc:
        return _json({"error": str(exc)}, status=400)
    # null, or what adapt_draft would change to make the draft acceptable
    return _json(result.to_dict() | {"adaptable": adaptability(t, d, result)})


def examples(request: HttpRequest) -> JsonResponse:
    return _json({"reported_examples": reported_examples(), "curated": curated_repos()})
