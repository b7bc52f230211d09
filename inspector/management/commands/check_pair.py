"""check_pair TARGET DRAFT: can DRAFT draft for TARGET in llama.cpp, rule by rule (the plain command: inspector.cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from inspector import cli
from inspector.management.base import SpecregCommand, UserError


class Command(SpecregCommand):
    help = (
        "Check whether DRAFT can draft for TARGET in llama.cpp speculative decoding. Sources are local "
        "paths or hf://OWNER/REPO[@REVISION]/PATH. Exit status: 0 compatible, 1 incompatible, 2 error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("target", help="the big model (path or hf:// source)")
        parser.add_argument(
            "draft",
            nargs="?",
            help="the small model that proposes tokens (or an EAGLE-3/DFlash "
            "sidecar); without it, the methods the target can use with no second model",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, target: str, draft: str | None = None, **options: Any) -> None:
        try:
            status = cli.check(target, draft, as_json=options["json"], out=self.stdout)
        except cli.UserError as exc:
            raise UserError(str(exc)) from None
        if status:
            # Exit 1 without an error line: "incompatible" is an answer, not a failure.
            self.stdout.flush()
            raise SystemExit(status)
