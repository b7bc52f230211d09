"""register_gguf PATH...: register GGUF files on this machine (named by absolute path)."""
from __future__ import annotations

from inspector.cli import SpecregCommand, UserError
from registry.hub_import import HubImportError, import_source
from registry.local_files import LocalFileError, register_local


class Command(SpecregCommand):
    help = "Register local GGUF files (or hf://OWNER/REPO[@REV]/PATH files) and compute their pairs."

    def add_arguments(self, parser) -> None:
        parser.add_argument("sources", nargs="+", help="paths (the first shard of a split file) or hf:// specs")

    def handle(self, *args, sources: list[str], **options) -> None:
        for source in sources:
            try:
                if source.startswith("hf://"):
                    o = import_source(source)
                    self.stdout.write(f"{o.status:<9} {o.source} (+{o.pairs_added} pairs)")
                else:
                    r = register_local(source)
                    self.stdout.write(f"{r.status:<9} {r.file.source} (+{r.pairs_added} pairs)")
            except (HubImportError, LocalFileError) as exc:
                raise UserError(str(exc)) from None
