"""recheck_pairs: check every stored pair again with the pinned llama.cpp rules; list the verdicts that changed."""

from __future__ import annotations

import json as _json

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand
from registry.catalog.orientation import resize_all
from registry.catalog.recheck import describe, recheck_pairs


class Command(SpecregCommand):
    help = (
        "Check every stored pair again with the rules of the pinned llama.cpp build (from the stored "
        "inspections; no file is read), store the new verdicts and list those that changed."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="list the changes without storing anything")
        parser.add_argument("--json", action="store_true", help="print the changes as JSON")
        parser.add_argument(
            "--sizes",
            action="store_true",
            help="first size every model again from its files' best evidence (tensor data, else the tensor list, else "
            "the size label) and turn round the pairs whose target is the smaller model",
        )
        parser.add_argument(
            "--stale",
            action="store_true",
            help="only the pairs an upgrade marked stale (rules_from ending +stale): quicker after an upgrade",
        )

    def handle(self, *args, dry_run: bool, json: bool, stale: bool, sizes: bool, **options) -> None:
        if sizes and not dry_run:
            resized, turned = resize_all()
            self.stderr.write(
                f"{resized:,} models sized again; {turned:,} pairs turned round (target and draft swapped)"
            )
        r = recheck_pairs(dry_run=dry_run, stale_only=stale)
        if json:
            self.stdout.write(
                _json.dumps(
                    {
                        "checked": r.checked,
                        "rules_from": r.rules_from,
                        "stored": not dry_run,
                        "changed": [
                            {
                                "pair": v.pair.pk,
                                "target": v.pair.target.source,
                                "draft": v.pair.draft.source,
                                "old": {
                                    "compatible": v.old_compatible,
                                    "failed_rule": v.old_failed_rule,
                                    "rules_from": v.old_rules_from,
                                },
                                "new": {
                                    "compatible": v.new_compatible,
                                    "failed_rule": v.new_failed_rule,
                                    "rules_from": v.new_rules_from,
                                    "state": v.new_state,
                                },
                                "reason": v.reason,
                            }
                            for v in r.changes
                        ],
                    },
                    indent=2,
                )
            )
            return
        for v in r.changes:
            self.stdout.write(terminal_safe(describe(v)))  # sources are names users gave
        self.stdout.write(
            f"{r.checked:,} pairs checked with the rules of llama.cpp {r.rules_from or '(none)'}; "
            f"{len(r.changes):,} verdicts changed" + (" (dry run: nothing stored)" if dry_run else "")
        )
