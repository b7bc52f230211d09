"""export_kb FILE: write this installation's knowledge base as versioned JSON."""

from __future__ import annotations

from django.conf import settings

from inspector.management.base import SpecregCommand, UserError
from registry.kb.export import export_kb


class Command(SpecregCommand):
    help = (
        "Write the whole knowledge base (files' inspections, pairs, measured runs, reported results and "
        "other apps' records, each with the installation it came from) to FILE as versioned JSON."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="where to write it (replaced whole)")

    def handle(self, *args, file: str, **options) -> None:
        try:
            counts = export_kb(file)
        except OSError as exc:
            raise UserError(f"{file}: {exc.strerror or exc}") from None
        what = ", ".join(f"{n:,} {k}" for k, n in counts.items())
        self.stdout.write(f"wrote {file}: {what} (installation {settings.SPECREG_INSTALLATION_ID})")
