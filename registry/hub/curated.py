"""The curated list of well-known repositories a first start offers to import, and that import."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from registry.hub.importing import HubImportError, HubUnreachable, ImportReport, JobDeadlinePassed, import_hf

DATA = Path(__file__).resolve().parent.parent / "data"


@cache
def curated_repos() -> list[dict[str, str]]:
    return json.loads((DATA / "curated.json").read_text())["repos"]


def import_curated(progress=None) -> tuple[list, list[tuple[str, str]], str]:
    """Import the curated repos: (reports, [(repo, error)], why the Hub is unreachable or "")."""
    reports: list[ImportReport] = []
    errors: list[tuple[str, str]] = []
    for entry in curated_repos():
        try:
            report = import_hf(entry["repo"], include=entry.get("include"))
        except JobDeadlinePassed:
            raise  # the job's time is up: the next repositories would not be read either
        except HubUnreachable as exc:
            return reports, errors, str(exc)  # no point asking the next nine
        except HubImportError as exc:
            errors.append((entry["repo"], str(exc)))
            continue
        reports.append(report)
        if progress:
            progress(report)
    return reports, errors, ""
