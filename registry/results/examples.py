"""First start: the reported results shipped as examples (the curated repositories: registry.hub.curated)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from django.db import transaction

from registry.models import Pair, ReportedResult
from registry.results.figures import refresh_best

DATA = Path(__file__).resolve().parent.parent / "data"


@cache
def reported_examples() -> list[dict[str, Any]]:
    return json.loads((DATA / "reported_examples.json").read_text())["examples"]


def apply_reported_examples() -> int:
    """Attach each example to the registered pairs of its two repositories; returns how many were added."""
    added = 0
    for ex in reported_examples():
        pairs = Pair.objects.filter(target__repo=ex["target_repo"], draft__repo=ex["draft_repo"], compatible=True)
        for pair in pairs:
            with transaction.atomic():
                _, created = ReportedResult.objects.get_or_create(
                    pair=pair,
                    k=ex["k"],
                    content_type=ex["content_type"],
                    citation=ex["citation"],
                    defaults={
                        f: ex.get(f)
                        for f in (
                            "acceptance",
                            "speedup",
                            "hardware",
                            "llama_cpp_build",
                            "source_url",
                            "tokens_per_second",
                            "baseline_tokens_per_second",
                        )
                    }
                    | {"method": ex.get("method") or "draft-simple"},
                )
                if created:
                    added += 1
                    refresh_best(pair)
    return added
