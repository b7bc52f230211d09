"""Reading the JSON that llama.cpp's SPEED-Bench client writes (``tools/server/bench/speed-bench/speed_bench.py
--output FILE``, its ``save_output``) and storing it as reported results: measured elsewhere, by a server we
did not watch, so never shown as measured.

The file: ``{"config": {url, model, bench, category, osl, concurrency, extra_inputs}, "selected_samples",
"completed_samples", "failed_samples", "summary": [{category, requests, turns, failed, avg_prompt_t_s,
avg_pred_t_s, avg_latency, draft_n, accepted, accept_rate}, …, {"category": "overall", …}], "results": […]}``.
Each summary row but "overall" becomes one reported result (content type = the category).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from registry.catalog.pairing import pair_for
from registry.hub.sources import SourceRegistrationError, resolve_file
from registry.models import GGUFFile, Pair, ReportedResult
from registry.results.reporting import ReportInvalid, add_reported

MAX_BYTES = 64 * 1024 * 1024  # a run of every SPEED-Bench sample writes a few MB; parsed whole
# SPEED-Bench's categories that are this registry's content types under another name.
CONTENT_TYPES = {"coding": "code", "code": "code", "math": "math", "writing": "prose"}


class SpeedBenchError(ValueError):
    """A file or an argument that cannot be imported; one line."""


@dataclass
class Row:
    category: str
    requests: int
    turns: int
    failed: int
    tokens_per_second: float | None
    draft_n: int
    accepted: int
    accept_rate: float | None


@dataclass
class SpeedBenchFile:
    name: str
    sha256: str
    bench: str
    category: str
    model: str
    osl: int | None
    concurrency: int | None
    extra_inputs: dict[str, Any]
    rows: list[Row]


def _refuse_constant(name: str) -> float:
    raise SpeedBenchError(f"{name} is not a number JSON allows")


def _number(row: dict, key: str, where: str, *, integer: bool = False, optional: bool = True) -> Any:
    v = row.get(key)
    if v is None:
        if optional:
            return None
        raise SpeedBenchError(f"{where}: '{key}' is missing")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise SpeedBenchError(
            f"{where}: '{key}' should be {'an integer' if integer else 'a number'}, got {type(v).__name__}"
        )
    if not math.isfinite(v) or v < 0 or (integer and v > 2**53):
        raise SpeedBenchError(f"{where}: '{key}' is out of range ({v!r:.40})")
    return v


def read(path: str | Path) -> SpeedBenchFile:
    """Parse and check a SPEED-Bench output file; SpeedBenchError (one line) for anything else."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SpeedBenchError(f"{path}: {size:,} bytes, more than a SPEED-Bench output ({MAX_BYTES:,} at most)")
        raw = path.read_bytes()
    except OSError as exc:
        raise SpeedBenchError(f"{path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise SpeedBenchError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise SpeedBenchError(f"{path}: nested too deeply to be a SPEED-Bench output") from None
    except json.JSONDecodeError as exc:
        raise SpeedBenchError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("summary"), list)
        or not isinstance(data.get("config"), dict)
    ):
        raise SpeedBenchError(
            f"{path}: not a SPEED-Bench output (expected an object with 'config' and 'summary', "
            "as speed_bench.py --output writes)"
        )
    config = data["config"]
    extra = config.get("extra_inputs") if isinstance(config.get("extra_inputs"), dict) else {}
    rows = []
    for i, row in enumerate(data["summary"][:1000]):
        where = f"{path.name}: summary[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("category"), str) or not row["category"].strip():
            raise SpeedBenchError(f"{where}: expected an object with a 'category'")
        rows.append(
            Row(
                category=row["category"].strip()[:64],
                requests=_number(row, "requests", where, integer=True, optional=False),
                turns=_number(row, "turns", where, integer=True) or 0,
                failed=_number(row, "failed", where, integer=True) or 0,
                tokens_per_second=_number(row, "avg_pred_t_s", where),
                draft_n=_number(row, "draft_n", where, integer=True) or 0,
                accepted=_number(row, "accepted", where, integer=True) or 0,
                accept_rate=_number(row, "accept_rate", where),
            )
        )
        if rows[-1].accept_rate is not None and rows[-1].accept_rate > 1:
            raise SpeedBenchError(f"{where}: 'accept_rate' {rows[-1].accept_rate} is above 1")

    def text(key: str) -> str:
        return str(config.get(key) or "")[:200]

    def integer(key: str) -> int | None:
        v = config.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return SpeedBenchFile(
        name=path.name[:100],
        sha256=hashlib.sha256(raw).hexdigest(),
        bench=text("bench"),
        category=text("category"),
        model=text("model"),
        osl=integer("osl"),
        concurrency=integer("concurrency"),
        extra_inputs=extra,
        rows=rows,
    )


def content_type(category: str) -> str:
    return CONTENT_TYPES.get(category.lower(), category.lower())[:32]


def resolve(spec: str) -> GGUFFile:
    """A registered file by id, or a source as check_pair takes it, registered if new (sources.resolve_file)."""
    try:
        return resolve_file(spec)
    except SourceRegistrationError as exc:
        raise SpeedBenchError(str(exc)) from None


def k_of(sb: SpeedBenchFile, k: int | None) -> int:
    """K: as given, else the request's own ``speculative.n_max`` (speed_bench.py --extra-inputs)."""
    if k is not None:
        return k
    v = sb.extra_inputs.get("speculative.n_max")
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1024:
        return v
    raise SpeedBenchError(
        f"{sb.name} does not say K (speculative.n_max in its extra_inputs): give --k, the server's --spec-draft-n-max"
    )


@dataclass
class Imported:
    pair: Pair
    added: list[ReportedResult]
    skipped: list[str]  # why, per row not imported


def import_file(
    sb: SpeedBenchFile,
    pair: Pair,
    *,
    method: str,
    hardware: str,
    build: str,
    k: int,
    baseline: SpeedBenchFile | None = None,
    source_url: str = "",
) -> Imported:
    """Store each category of ``sb`` as a reported result of ``pair`` (in one transaction).

    A row already imported from the same file (same pair, K, method, category and file hash in the
    citation) is skipped, so importing a file twice adds nothing.
    """
    base = {r.category: r.tokens_per_second for r in baseline.rows} if baseline else {}
    rows = [r for r in sb.rows if r.category != "overall"] or sb.rows  # one category: "overall" is the same
    added, skipped = [], []
    with transaction.atomic():
        for r in rows:
            if r.requests == 0 or r.tokens_per_second is None:
                skipped.append(f"{r.category}: no completed request ({r.failed} failed)")
                continue
            plain = base.get(r.category)
            citation = (
                f"SPEED-Bench {sb.bench or '?'}/{r.category}: {r.requests} requests ({r.turns} turns, "
                f"{r.failed} failed), {r.accepted} of {r.draft_n} drafted tokens accepted"
                + (f", osl {sb.osl}" if sb.osl else "")
                + (
                    f", plain run {baseline.name} sha256:{baseline.sha256[:12]}"
                    if plain and baseline is not None
                    else ""
                )
                + f"; file {sb.name} sha256:{sb.sha256[:12]}"
            )[:500]
            if ReportedResult.objects.filter(
                pair=pair,
                k=k,
                method=method,
                content_type=content_type(r.category),
                citation__contains=f"sha256:{sb.sha256[:12]}",
            ).exists():
                skipped.append(f"{r.category}: already imported from this file")
                continue
            notes = json.dumps(
                {
                    "imported_by": "import_speed_bench",
                    "bench": sb.bench,
                    "category": r.category,
                    "server_model": sb.model,
                    "concurrency": sb.concurrency,
                    "extra_inputs": sb.extra_inputs,
                    "sha256": sb.sha256,
                },
                ensure_ascii=False,
            )[:4000]
            data = {
                "k": str(k),
                "method": method,
                "content_type": content_type(r.category),
                "hardware": hardware,
                "llama_cpp_build": build,
                "citation": citation,
                "source_url": source_url,
                "notes": notes,
                "tokens_per_second": str(r.tokens_per_second),
                "acceptance": "" if r.accept_rate is None else str(r.accept_rate),
                "baseline_tokens_per_second": "" if plain is None else str(plain),
                "speedup": "" if not plain else str(r.tokens_per_second / plain),
            }
            try:
                added.append(add_reported(pair, data))  # the command line: trusted, no account
            except ReportInvalid as exc:
                raise SpeedBenchError(f"{sb.name}: {r.category}: {exc}") from None
    return Imported(pair, added, skipped)


def pair_of(target: GGUFFile, draft: GGUFFile | None) -> Pair:
    """The pair the figures belong to; without a draft the target's own pair, as for draftless runs."""
    pair = pair_for(target, draft or target)
    if draft is not None and not pair.compatible:
        raise SpeedBenchError(
            f"{draft.source} cannot draft for {target.source} (rule '{pair.failed_rule}' fails): "
            "figures for it would describe something llama.cpp refuses"
        )
    return pair
