"""reread_headers: read again the headers of registered files whose token types were not stored, and store them."""

from __future__ import annotations

import argparse
import json as _json

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand
from registry.catalog.reread import Outcome, reread
from registry.hub.importing import RegisteredHeaders


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return n


class Command(SpecregCommand):
    help = (
        "Read again the headers of registered files whose token types were not stored (registered before the "
        "registry stored them), store the types and decide again whether their near-miss pairs are adaptable. "
        "A local file is read only while it has its registered size, a Hub file only while its etag and size are "
        "the registered ones. Exit status: 0 all done, 1 some files failed (one line each), 2 error."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--limit", type=positive, metavar="N", help="read at most N files")
        parser.add_argument("--dry-run", action="store_true", help="list the files without reading or storing")
        parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")

    def handle(self, *args, limit: int | None, dry_run: bool, json: bool, **options) -> None:
        def progress(o: Outcome) -> None:
            if json:
                return
            what = f" ({o.types:,} token types)" if o.types else (f": {o.message}" if o.message else "")
            self.stdout.write(terminal_safe(f"{o.status:<10} {o.source}{what}"))  # sources are names users gave

        report = reread(RegisteredHeaders(), limit=limit, dry_run=dry_run, progress=progress)
        if json:
            doc = {
                "dry_run": dry_run,
                "files": [
                    {"id": o.file_id, "source": o.source, "status": o.status, "message": o.message, "types": o.types}
                    for o in report.outcomes
                ],
                "failed": len(report.failed),
                "decisions": dict(sorted(report.decisions.items())),
            }
            self.stdout.write(_json.dumps(doc, indent=2))
        else:
            self.stdout.write(report.summary())
        if report.failed:
            self.stdout.flush()
            raise SystemExit(1)
