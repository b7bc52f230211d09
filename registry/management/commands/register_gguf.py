"""register_gguf PATH...: register GGUF files on this machine (named by absolute path)."""

from __future__ import annotations

from inspector.management.base import SpecregCommand, UserError
from registry.hub.sources import SourceRegistrationError, register_source


class Command(SpecregCommand):
    help = "Register local GGUF files (or hf://OWNER/REPO[@REV]/PATH files) and compute their pairs."

    def add_arguments(self, parser) -> None:
        parser.add_argument("sources", nargs="+", help="paths (the first shard of a split file) or hf:// specs")

    def handle(self, *args, sources: list[str], **options) -> None:
        for source in sources:
            try:
                r = register_source(source)
            except SourceRegistrationError as exc:
                raise UserError(str(exc)) from None
            self.stdout.write(f"{r.status:<9} {r.file.source} (+{r.pairs_added} pairs)")
