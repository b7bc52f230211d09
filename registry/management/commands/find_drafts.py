"""find_drafts TARGET: compatible drafts already registered, then candidates found and checked on the Hub."""
from __future__ import annotations

import json

from inspector.management.base import SpecregCommand, UserError
from registry.drafts import DraftSearchError, find_drafts
from registry.serializers import pair_row


class Command(SpecregCommand):
    help = ("List drafts for TARGET (a registered source, hf://OWNER/REPO[@REV]/PATH, or a local path): "
            "compatible files already registered, then Hub repositories of the same family, its model "
            "tree and purpose-built drafts (tagged 'draft' or named *DRAFT*), checked remotely and registered.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("target")
        parser.add_argument("--no-hub", action="store_true", help="only what is registered")
        parser.add_argument("--limit", type=int, default=5, help="Hub repositories to check (default 5)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args, target: str, no_hub: bool, limit: int, **options) -> None:
        if limit < 0:
            raise UserError("--limit must be 0 or more")
        as_json = options["json"]

        def progress(c) -> None:
            if not as_json:
                self.stdout.write(f"  hub {c.status:<12} {c.repo_id} [{c.why}] {c.message}")

        try:
            if not as_json:
                self.stdout.write(f"Drafts for {target}")
            search = find_drafts(target, hub=not no_hub, limit=limit, progress=progress)
        except DraftSearchError as exc:
            raise UserError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps({
                "target": search.target.source,
                "registered": [pair_row(p) for p in search.registered],
                "hub": [{"repo": c.repo_id, "why": c.why, "status": c.status, "message": c.message,
                         "pair": pair_row(c.pair) if c.pair else None} for c in search.hub],
                "hub_error": search.hub_error,
            }, indent=2))
        else:
            self.stdout.write(f"Registered compatible drafts: {len(search.registered)}")
            for p in search.registered:
                self.stdout.write(f"  {p.draft.source}  (size ratio {p.size_ratio or 0:.1f}×)")
            if not no_hub:
                self.stdout.write(f"Found on the Hub: {len(search.found)} compatible")
                for p in search.found:
                    self.stdout.write(f"  {p.draft.source}  (size ratio {p.size_ratio or 0:.1f}×)")
        if search.hub_error:
            raise UserError(f"Hub search failed: {search.hub_error}")
