"""First start: the reported results shipped as examples, and the curated list of well-known repos."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.db import transaction

from .models import Pair, ReportedResult
from .results import refresh_best

DATA = Path(__file__).resolve().parent / "data"


@lru_cache(maxsize=None)
def reported_examples() -> list[dict[str, Any]]:
    return json.loads((DATA / "reported_examples.json").read_text())["examples"]


@lru_cache(maxsize=None)
def curated_repos() -> list[dict[str, str]]:
    return json.loads((DATA / "curated.json").read_text())["repos"]


def apply_reported_examples() -> int:
    """Attach each example to the registered pairs of its two repositories; returns how many were added."""
    added = 0
    for ex in reported_examples():
        pairs = Pair.objects.filter(target__repo=ex["target_repo"], draft__repo=ex["draft_repo"], compatible=True)
        for pair in pairs:
            with transaction.atomic():
                _, created = ReportedResult.objects.get_or_create(
                    pair=pair, k=ex["k"], content_type=ex["content_type"], citation=ex["citation"],
                    defaults={f: ex.get(f) for f in ("acceptance", "speedup", "hardware", "llama_cpp_build", "source_url",
                                                     "tokens_per_second", "baseline_tokens_per_second")}
                    | {"method": ex.get("method") or "draft-simple"},
                )
                if created:
                    added += 1
                    refresh_best(pair)
    return added


def import_curated(progress=None) -> tuple[list, list[tuple[str, str]], str]:
    """Import the curated repos: (reports, [(repo, error)], why the Hub is unreachable or "")."""
    from .hub_import import HubImportError, HubUnreachable, import_hf

    reports, errors = [], []
    for entry in curated_repos():
        try:
            report = import_hf(entry["repo"], include=entry.get("include"))
        except HubUnreachable as exc:
            return reports, errors, str(exc)  # no point asking the next nine
        except HubImportError as exc:
            errors.append((entry["repo"], str(exc)))
            continue
        reports.append(report)
        if progress:
            progress(report)
    return reports, errors, ""
