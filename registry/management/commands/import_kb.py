"""import_kb FILE: merge a knowledge base written by export_kb (here or elsewhere) into this installation."""
from __future__ import annotations

from inspector.cli import terminal_safe
from inspector.management.base import SpecregCommand, UserError
from registry.kb.importer import KBError, import_kb


class Command(SpecregCommand):
    help = ("Merge a knowledge base written by export_kb into this installation, in one transaction: files are "
            "registered and paired by this installation's rules, results kept with where they came from; "
            "importing the same file again adds nothing.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="a file written by export_kb")

    def handle(self, *args, file: str, **options) -> None:
        try:
            report = import_kb(file)
        except KBError as exc:
            raise UserError(f"{file}: nothing imported: {exc}") from None
        for line in report.messages:
            self.stdout.write(terminal_safe(line))  # names come from the file
        what = ", ".join(f"{n:,} {k}" for k, n in report.counts.items()) or "nothing in it"
        self.stdout.write(terminal_safe(f"imported {file} from installation {report.source_installation}: {what}"))
