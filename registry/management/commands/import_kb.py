"""import_kb FILE: merge a knowledge base written by export_kb (here or elsewhere) into this installation."""

from __future__ import annotations

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand, UserError
from registry.kb.importer import KBError, import_kb


class Command(SpecregCommand):
    help = (
        "Merge a knowledge base written by export_kb into this installation, in one transaction, streaming it "
        "(memory stays flat whatever its size): files are registered and paired by this installation's rules, "
        "results kept with where they came from; importing the same file again adds nothing."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="a file written by export_kb")
        parser.add_argument(
            "--allow-local-paths",
            action="store_true",
            help="also take files whose source is a local path (by default only hf:// sources and "
            "names registered here: pages and benchmarks treat a path as a file on this server)",
        )

    def handle(self, *args, file: str, allow_local_paths: bool = False, **options) -> None:
        try:
            report = import_kb(file, allow_local_paths=allow_local_paths)
        except KBError as exc:
            raise UserError(f"{file}: nothing imported: {exc}") from None
        for line in report.messages:
            self.stdout.write(terminal_safe(line))  # names come from the file
        what = ", ".join(f"{n:,} {k}" for k, n in report.counts.items()) or "nothing in it"
        self.stdout.write(terminal_safe(f"imported {file} from installation {report.source_installation}: {what}"))
