"""inspect_gguf SOURCE: everything specreg reads from a GGUF header (the plain command in inspector.cli)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from inspector import cli
from inspector.management.base import SpecregCommand, UserError


class Command(SpecregCommand):
    help = (
        "Show a GGUF file's metadata and tokenizer (stored and as llama.cpp applies it). SOURCE is a "
        "local path or hf://OWNER/REPO[@REVISION]/PATH; only the header is read."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--tokens", type=int, default=0, metavar="N", help="also print the first N tokens")

    def handle(self, *args: Any, source: str, tokens: int, **options: Any) -> None:
        try:
            cli.inspect(source, as_json=options["json"], tokens=tokens, out=self.stdout)
        except cli.UserError as exc:
            raise UserError(str(exc)) from None
