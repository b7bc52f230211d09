"""check_pair TARGET DRAFT: can DRAFT draft for TARGET in llama.cpp, rule by rule."""
from __future__ import annotations

import json

from django.conf import settings

from inspector.cli import SpecregCommand, UserError
from inspector.compat import check_pair
from inspector.info import InspectError, inspect_source

MARKS = {True: "ok  ", False: "FAIL", None: "n/a "}


class Command(SpecregCommand):
    help = ("Check whether DRAFT can draft for TARGET in llama.cpp speculative decoding. Sources are local "
            "paths or hf://OWNER/REPO[@REVISION]/PATH. Exit status: 0 compatible, 1 incompatible, 2 error.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("target", help="the big model (path or hf:// source)")
        parser.add_argument("draft", help="the small model that proposes tokens")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args, target: str, draft: str, **options) -> None:
        try:
            t = inspect_source(target, settings.SPECREG_MAX_HEADER_BYTES)
            d = inspect_source(draft, settings.SPECREG_MAX_HEADER_BYTES)
        except InspectError as exc:
            raise UserError(str(exc)) from None
        result = check_pair(t, d)
        if options["json"]:
            self.stdout.write(_json_dumps(result.to_dict()))
        else:
            self.stdout.write(format_check(result))
        if not result.compatible:
            # Exit 1 without an error line: "incompatible" is an answer, not a failure.
            self.stdout.flush()
            raise SystemExit(1)


def _json_dumps(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)


def format_check(result) -> str:
    lines = [f"{result.verdict.capitalize()}: draft {result.draft['source']} for target {result.target['source']} "
             f"(rules of llama.cpp {result.rules_from})"]
    for c in result.checks:
        lines.append(f"  [{MARKS[c.ok]}] {c.rule:<12} {c.detail}")
    for w in result.warnings:
        lines.append(f"  warning ({w.code}): {w.message}")
    return "\n".join(lines)
