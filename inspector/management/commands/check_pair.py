"""check_pair TARGET DRAFT: can DRAFT draft for TARGET in llama.cpp, rule by rule (the plain command: inspector.cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from inspector import cli
from inspector.management.base import SpecregCommand, UserError


class Command(SpecregCommand):
    help = cli.CHECK_PAIR_HELP

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_check_pair_arguments(parser)

    def handle(self, *args: Any, target: str, draft: str | None = None, **options: Any) -> None:
        try:
            status = cli.check(target, draft, as_json=options["json"], out=self.stdout)
        except cli.UserError as exc:
            raise UserError(str(exc)) from None
        if status:
            # Exit 1 without an error line: "incompatible" is an answer, not a failure.
            self.stdout.flush()
            raise SystemExit(status)
