"""Pages that read: the pairs table (and its CSV), a model, a pair."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseBase,
    HttpResponsePermanentRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from registry.access.policy import may_see_paths
from registry.access.redact import redact_text, replacements
from registry.cache_keys import cached
from registry.hub.curated import curated_repos
from registry.models import GGUFFile, Pair
from registry.pair_state import state_of
from registry.results.examples import reported_examples
from registry.results.reporting import ReportedResultForm, ReportInvalid, may_report
from registry.results.reporting import add_reported as store_reported
from registry.table.cache import rendered_table
from registry.table.cells import PAIR_URL
from registry.table.menus import facets
from registry.table.pages import iter_rows
from registry.table.request import SORTS, VERDICTS, TableQuery, TableQueryError
from registry.web.forms import ImportForm
from registry.web.pages import inspection_context, merged_into, model_page, pair_page


def home(request: HttpRequest) -> HttpResponse:
    try:
        tq = TableQuery.from_params(request.GET, search_paths=may_see_paths(request.user))
    except TableQueryError as exc:
        return HttpResponseBadRequest(f"{exc}\n", content_type="text/plain; charset=utf-8")
    empty = cached("empty", "", lambda: not GGUFFile.objects.exists())
    return render(
        request,
        "registry/home.html",
        {
            "tq": tq,
            "table": "" if empty else rendered_table(tq, sort_links(tq)),
            "facets": facets(),
            "verdicts": list(VERDICTS.items()),
            "first_start": empty,
            "csv_query": urlencode(tq.params(page=1)),
            "examples": reported_examples() if empty else [],
            "curated": curated_repos() if empty else [],
            "import_form": ImportForm() if empty else None,
        },
    )


def sort_links(tq: TableQuery) -> dict[str, dict[str, str]]:
    """Per column: the query string that sorts by it (descending first, then flipping) and an arrow."""
    out = {}
    for col in SORTS:
        flipped = col if tq.sort == f"-{col}" else f"-{col}"
        arrow = "▼" if tq.sort == f"-{col}" else "▲" if tq.sort == col else ""
        out[col] = {"query": "?" + urlencode(tq.params(sort=flipped, page=1)), "arrow": arrow}
    return out


CSV_COLUMNS = [
    "target",
    "draft",
    "compatible",
    "failed_rule",
    "size_ratio",
    "best_k",
    "acceptance",
    "speedup",
    "result_kind",
    "content_type",
    "target_parameters",
    "draft_parameters",
    "rules_from",
    # the best predicted setting: its own columns, never mixed into the measured/reported ones
    "predicted_speedup",
    "predicted_k",
    "predicted_method",
    "predicted_content_type",
    # over every combination of the two models' tokenizer classes: all, partial, none; and N/M quants of the
    # draft model compatible with the target file of the row
    "verdict",
    "compatible_quants",
    # an incompatible pair adapt_draft could reconcile: what it changes ("7 special tokens, BOS"), else empty
    "adaptable",
    "method",
    # how llama.cpp rolls the pair back: kv, checkpoints, rollback, none (inspector.state)
    "state",
    "pair_url",
]


class _Echo:
    def write(self, value: str) -> str:
        return value


# A cell a spreadsheet would run as a formula (OWASP's list: = + - @, tab and carriage return first).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """Text that starts like a formula gets a leading apostrophe, which spreadsheets show as text; numbers
    (negative ones included) are written as numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def pairs_csv(request: HttpRequest) -> HttpResponseBase:
    """Every row of the table as filtered (all pages), streamed in keyset chunks: each row costs the same."""
    try:
        tq = TableQuery.from_params(request.GET, search_paths=may_see_paths(request.user))
    except TableQueryError as exc:
        return HttpResponseBadRequest(f"{exc}\n", content_type="text/plain; charset=utf-8")
    writer = csv.writer(_Echo())
    base = request.build_absolute_uri(PAIR_URL)
    # For a viewer who may not see server paths, each cell is redacted first and escaped second: the response's
    # own redaction, after escaping, would turn a local file named "=HYPERLINK(…).gguf" back into a formula.
    hidden = [] if may_see_paths(request.user) else replacements()  # read once: not one query per cell
    shown = (lambda v: v) if not hidden else (lambda v: redact_text(v, hidden) if isinstance(v, str) else v)

    def rows() -> Iterator[str]:
        yield writer.writerow(CSV_COLUMNS)
        for chunk in iter_rows(tq):
            for row in chunk:
                p, b = row.pair, row.best
                yield writer.writerow(
                    [
                        csv_cell(shown(v))
                        for v in (
                            p.target.source,
                            p.draft.source,
                            p.compatible,
                            p.failed_rule,
                            f"{p.size_ratio:.3f}" if p.size_ratio else "",
                            b.k if b else "",
                            "" if not b or b.acceptance is None else f"{b.acceptance:.4f}",
                            "" if not b or b.speedup is None else f"{b.speedup:.3f}",
                            b.kind if b else "",
                            b.content_type if b else "",
                            p.target.parameter_count,
                            p.draft.parameter_count,
                            p.rules_from,
                            "" if p.predicted_speedup is None else f"{p.predicted_speedup:.3f}",
                            p.predicted_k or "",
                            p.predicted_method,
                            p.predicted_content_type,
                            p.verdict,
                            f"{p.compatible_quants[0]}/{p.compatible_quants[1]}" if p.compatible_quants else "",
                            p.adaptable["summary"] if p.adaptable else "",
                            b.method if b else "",
                            state_of(p).kind,
                            f"{base}{p.pk}/",
                        )
                    ]
                )

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="specreg-pairs.csv"'
    return response


def model(request: HttpRequest, pk: int) -> HttpResponse:
    page = model_page(pk, request.GET.get("file"))
    return render(request, "registry/model.html", {"page": page, **inspection_context(page.file.info)})


def pair(request: HttpRequest, pk: int) -> HttpResponse:
    if (moved := merged_into(pk)) is not None:  # an old link: the pair of files is now a pair of base models
        return _moved(request, reverse("pair", args=[moved]))
    page = pair_page(pk)
    form = ReportedResultForm() if may_report(request.user) else None
    return render(request, "registry/pair.html", {"page": page, "p": page.pair, "form": form})


def _moved(request: HttpRequest, url: str) -> HttpResponse:
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(url + (f"?{query}" if query else ""))


@login_required
@require_POST
def add_reported(request: HttpRequest, pk: int) -> HttpResponse:
    if not may_report(request.user):  # before the lookup: a stranger learns nothing about which pairs exist
        return HttpResponse(
            "Adding reported results needs staff status or the 'add reported result' permission.\n",
            status=403,
            content_type="text/plain",
        )
    p = get_object_or_404(Pair, pk=pk)
    try:
        # The page's own form (its fields only), through the function the API and import_speed_bench use.
        store_reported(p, request.POST, request.user, form_class=ReportedResultForm)
    except ReportInvalid as exc:
        page = pair_page(pk)
        return render(request, "registry/pair.html", {"page": page, "p": page.pair, "form": exc.form}, status=400)
    return redirect(p.get_absolute_url() + "#reported")
