"""Writing this installation's knowledge base as one versioned JSON file."""

from __future__ import annotations

import base64
import json
import math
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from inspector.llama_rules import LLAMA_CPP_BUILD
from registry.kb.schema import FORMAT, SCHEMA_VERSION, now_iso
from registry.kb.sections import ExportContext, load_sections
from registry.models import BenchmarkRun, GGUFFile, Pair, ReportedResult, TokenTable, TokenTypeTable
from registry.pair_state import state_of
from registry.results.figures import FIGURES, LOAD_FIGURES

RESULT_FIELDS = (
    "temperature",
    "p_min",
    "n_predict",
    "repeats",
    "n_prompts",
    "status",
    "error",
    "speculation_ran",
    "baseline_min",
    "baseline_max",
    "tps_min",
    "tps_max",
    "drafted",
    "accepted",
    "mean_accepted",
    "identical",
    "divergences",
    "other_cpu_share",
    "via",
    # 1.2: measured under load (runner.measure.load)
    "clients",
    *LOAD_FIGURES,
    "speedup_min",
    "speedup_max",
    "pairs",
)


def finite(value: Any) -> Any:
    # JSON has no NaN or infinity; a figure that is not a number is no figure.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


# What a predicted figure carries besides the common figures (runner.predict.runs.store_predictions).
PREDICTED_FIELDS = (
    "p_min",
    "options",
    "n_predict",
    "n_prompts",
    "task_set",
    "hardware_class",
    "drafted",
    "accepted",
    "tokens",
    "near_ties",
)


# What a soak carries besides the common figures (runner.soak.targets). deployment_ref is left out: it is the id of a
# team deployment at the exporting installation, which names nothing elsewhere.
STABILITY_FIELDS = (
    "method",
    "p_min",
    "options",
    "clients",
    "parallel",
    "planned_s",
    "elapsed_s",
    "interval_s",
    "status",
    "verdict",
    "command",
    "intervals",
    "requests",
    "errors",
    "timeouts",
    "rss_start_mb",
    "rss_end_mb",
    "acceptance_min",
    "acceptance_max",
    "compared",
    "differing",
    "prompt_repeats",
)


# What a pair's line reads: its verdict, and its files' names and what their state kind is decided from.
PAIR_EXPORT = (
    "compatible",
    "failed_rule",
    "rules_from",
    "verdict",
    *(
        f"{side}__{c}"
        for side in ("target", "draft")
        for c in ("source", "architecture", "arch_kind", "speculative_type")
    ),
)


def _specreg_version() -> str:
    try:
        return version("specreg")
    except PackageNotFoundError:
        return ""


def _figures(r: Any) -> dict[str, Any]:
    return {**{f: getattr(r, f) for f in FIGURES}, "created_at": now_iso(r.created_at)}


Arrays = dict[int, tuple[str, int]]  # token tables' or token type arrays' row id -> (sha256, count)


def _types_of(f: GGUFFile, tables: Arrays, types: Arrays) -> str | None:
    """The sha256 of the file's token types, where they type its token table: an importer refuses types whose
    count is not the table's (a header may hold any array), and one such file must not make the whole export
    unimportable."""
    if f.token_types_id is None or f.token_table_id is None:
        return None
    (sha, count), (_, tokens) = types[f.token_types_id], tables[f.token_table_id]
    return sha if count == tokens else None


def _file(f: GGUFFile, here: str, tables: Arrays, types: Arrays) -> dict[str, Any]:
    return {
        "source": f.source,
        "repo": f.repo,
        "revision": f.revision,
        "path": f.path,
        "commit": f.commit,
        "size": f.size,
        "etag": f.etag,
        "token_table": tables[f.token_table_id][0] if f.token_table_id is not None else None,
        "token_types": _types_of(f, tables, types),  # 1.4
        "info": f.info,
        "inspected_at": now_iso(f.inspected_at),
        "installation": f.origin_installation or here,
        "base_model": None
        if f.model.base is None
        else {"key": f.model.base.key, "name": f.model.base.name, "rule": f.model.base.rule},
    }


def _run(run: BenchmarkRun, ctx: ExportContext) -> dict[str, Any]:
    who = ctx.provenance(run, run.requested_by.username if run.requested_by else "")
    results = []
    for r in run.results.all():
        results.append(
            {**_figures(r), **{f: getattr(r, f) for f in RESULT_FIELDS}, "method": getattr(r, "method", "") or ""}
        )  # getattr: a result without a method exports ""
    predictions = [{**_figures(x), **{f: getattr(x, f) for f in PREDICTED_FIELDS}} for x in run.predictions.all()]
    stability = [
        {**_figures(x), **{f: getattr(x, f) for f in STABILITY_FIELDS}, "finished_at": now_iso(x.finished_at)}
        for x in run.soaks.all()
    ]
    return {
        **who,
        "target": run.measured_target.source,  # the files it measured (1.1); its pair's in 1.0
        "draft": run.measured_draft.source,
        "status": run.status,
        "params": run.params,
        "hardware": run.hardware,
        "hardware_class": run.hardware_class,
        "build": run.build,
        "summary": run.summary,
        "report_md": run.report_md,
        "server_command": run.server_command,
        "systemd_unit": run.systemd_unit,
        "error": run.error,
        "created_at": now_iso(run.created_at),
        "started_at": now_iso(run.started_at),
        "finished_at": now_iso(run.finished_at),
        "results": results,
        "predictions": predictions,
        "stability": stability,
    }


def _reported(r: ReportedResult, ctx: ExportContext) -> dict[str, Any]:
    who = ctx.provenance(r, r.reported_by.username if r.reported_by else "")
    return {
        **who,
        **_figures(r),
        "target": r.pair.target.source,
        "draft": r.pair.draft.source,
        "source_url": r.source_url,
        "citation": r.citation,
        "notes": r.notes,
    }


def _token_types(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The token type arrays the exported files name (1.4), once each, as token tables are written."""
    named = {f["token_types"] for f in files if f["token_types"]}
    out = []
    for t in TokenTypeTable.objects.filter(sha256__in=named).order_by("sha256").iterator(chunk_size=20):
        out.append({"sha256": t.sha256, "count": t.count, "blob": base64.b64encode(bytes(t.blob)).decode()})
    return out


def knowledge_base() -> dict[str, Any]:
    """Everything this installation knows, as the format's dict (files, pairs, runs, reported, sections)."""
    here = settings.SPECREG_INSTALLATION_ID
    ctx = ExportContext(here)
    tables = {pk: (sha, n) for pk, sha, n in TokenTable.objects.values_list("pk", "sha256", "count")}
    types = {pk: (sha, n) for pk, sha, n in TokenTypeTable.objects.values_list("pk", "sha256", "count")}
    used = set(GGUFFile.objects.exclude(token_table=None).values_list("token_table_id", flat=True))
    token_tables = []
    for t in TokenTable.objects.filter(pk__in=used).order_by("sha256").iterator(chunk_size=20):
        token_tables.append({"sha256": t.sha256, "count": t.count, "blob": base64.b64encode(bytes(t.blob)).decode()})
    files = [
        _file(f, here, tables, types)
        for f in GGUFFile.objects.select_related("model__base").order_by("source").iterator(chunk_size=200)
    ]
    token_types = _token_types(files)
    pairs = [
        {
            "target": p.target.source,
            "draft": p.draft.source,
            "compatible": p.compatible,
            "failed_rule": p.failed_rule,
            "rules_from": p.rules_from,
            "verdict": p.verdict,
            "state": state_of(p).kind,
        }
        for p in Pair.objects.order_by("target__source", "draft__source")
        .select_related("target", "draft")
        .only(*PAIR_EXPORT)
        .iterator(chunk_size=500)
    ]
    # Finished runs only: a queued or running one is this installation's work in progress.
    runs = [
        _run(r, ctx)
        for r in BenchmarkRun.objects.filter(status__in=BenchmarkRun.FINISHED)
        .select_related("pair__target", "pair__draft", "target_file", "draft_file", "requested_by")
        .prefetch_related("results", "predictions", "soaks")
        .defer("pair__target__info", "pair__draft__info", "target_file__info", "draft_file__info", "log")
        .order_by("pk")
    ]
    reported = [
        _reported(r, ctx)
        for r in ReportedResult.objects.select_related("pair__target", "pair__draft", "reported_by")
        .defer("pair__target__info", "pair__draft__info")
        .order_by("pk")
    ]
    return finite(
        {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "exported_at": now_iso(timezone.now()),
            "installation": {"id": here, "rules_from": LLAMA_CPP_BUILD, "specreg_version": _specreg_version()},
            "token_tables": token_tables,
            "token_types": token_types,
            "files": files,
            "pairs": pairs,
            "runs": runs,
            "reported": reported,
            "sections": {name: s.export(ctx) for name, s in load_sections().items()},
        }
    )


def export_kb(path: str | os.PathLike) -> dict[str, int]:
    """Write the knowledge base to ``path`` (replaced whole, never left half-written); returns counts."""
    target = Path(path)
    # The temporary file first: a folder that cannot be written fails before the database is read.
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            kb = knowledge_base()
            json.dump(kb, out, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    counts = {k: len(kb[k]) for k in ("files", "pairs", "runs", "reported")}
    counts["results"] = sum(len(r["results"]) for r in kb["runs"])
    counts["predictions"] = sum(len(r["predictions"]) for r in kb["runs"])
    counts["stability"] = sum(len(r["stability"]) for r in kb["runs"])
    counts.update({name: len(items) for name, items in kb["sections"].items()})
    return counts
