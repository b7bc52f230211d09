"""inspect_gguf SOURCE: everything specreg reads from a GGUF header (the plain command in inspector.cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from inspector import cli
from inspector.management.base import SpecregCommand, UserError


class Command(SpecregCommand):
    help = cli.INSPECT_HELP

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_inspect_arguments(parser)

    def handle(self, *args: Any, source: str, tokens: int, **options: Any) -> None:
        try:
            cli.inspect(source, as_json=options["json"], tokens=tokens, out=self.stdout)
        except cli.UserError as exc:
            raise UserError(str(exc)) from None
