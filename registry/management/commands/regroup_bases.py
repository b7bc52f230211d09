"""regroup_bases: group a registry again by today's base-model rules, keeping every result, note and deployment."""

from __future__ import annotations

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand
from registry.catalog.regroup import regroup_all


class Command(SpecregCommand):
    help = (
        "Group base models again by today's rules (registry.catalog.bases): a file that joined a base model by the "
        "names it claims, with a tokenizer class the model did not hold, moves to a base model of its own; an "
        "adapted draft is keyed by the provenance specreg verified (an adapt job here, or tensor data hashed alike), "
        "and one that only claims it becomes an ordinary file. Pairs stay with their base models: results, notes "
        "and deployments are kept. Run once after upgrading."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="list what would change without changing it")

    def handle(self, *args, dry_run: bool, **options) -> None:
        r = regroup_all(dry_run=dry_run)
        for name in r.moved_out:
            self.stdout.write(terminal_safe(f"moved to a base model of its own: {name}"))
        for change in r.rekeyed:
            self.stdout.write(terminal_safe(f"adapted base model keyed by verified provenance: {change}"))
        for source in r.unverified:
            self.stdout.write(terminal_safe(f"adaptation not verified (an ordinary file now): {source}"))
        verb = "would change" if dry_run else "changed"
        self.stderr.write(f"{len(r.moved_out) + len(r.rekeyed):,} base model(s) {verb}")
