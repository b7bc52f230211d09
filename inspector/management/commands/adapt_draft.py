"""adapt_draft TARGET DRAFT --output OUT.gguf: a copy of a near-miss DRAFT that llama.cpp accepts for TARGET.

Exit status: 0 written, 1 not adaptable (one line naming the rule that blocks it; nothing written), 2 an error
(a bad path, a malformed or partial GGUF, no room; one line). The logic is inspector.adapt (plain Python).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from inspector import adapt, cli
from inspector.info import DEFAULT_MAX_HEADER
from inspector.management.base import SpecregCommand, UserError
from inspector.tokens import quoted

SHOWN_TOKENS = 20  # token changes listed one per line; the rest are counted


class Command(SpecregCommand):
    help = (
        "Write a copy of DRAFT whose tokenizer metadata agrees with TARGET where llama.cpp compares them (special "
        "token texts and types, BOS/EOS ids and flags), its tensor data unchanged, so that check_pair TARGET OUTPUT "
        "passes. TARGET is a local path or hf:// source (only its header is read); DRAFT is a whole local file. "
        "Exit status: 0 written, 1 not adaptable (the rule that blocks it; nothing written), 2 error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "target", help="the model to draft for (a path or hf:// source; a header-only part will do)"
        )
        parser.add_argument("draft", help="the near-miss draft model: a whole local GGUF file")
        parser.add_argument(
            "--output", "-o", required=True, metavar="OUT.gguf", help="where to write the adapted draft"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--max-changed",
            type=int,
            default=adapt.DEFAULT_MAX_CHANGED,
            metavar="N",
            help=f"adapt at most N differing special token texts (default {adapt.DEFAULT_MAX_CHANGED})",
        )
        parser.add_argument(
            "--max-alignment",
            type=int,
            default=adapt.DEFAULT_MAX_ALIGNMENT,
            metavar="BYTES",
            help=f"refuse a draft whose general.alignment is past BYTES (default {adapt.DEFAULT_MAX_ALIGNMENT:,})",
        )
        parser.add_argument("--force", action="store_true", help="replace OUT.gguf if it exists")

    def handle(self, *args: Any, target: str, draft: str, output: str, **options: Any) -> None:
        try:
            result = adapt.adapt(
                target,
                draft,
                output,
                max_changed=options["max_changed"],
                max_alignment=options["max_alignment"],
                force=options["force"],
                max_header_bytes=_max_header_bytes(),
            )
        except adapt.NotAdaptable as exc:
            if options["json"]:
                self.stdout.write(
                    cli.json_text(
                        {"adapted": False, "target": target, "draft": draft, "rule": exc.rule, "reason": exc.detail}
                    )
                )
                self.stdout.flush()
                raise SystemExit(1) from None
            raise CommandError(str(exc), returncode=1) from None
        except adapt.AdaptError as exc:
            raise UserError(str(exc)) from None
        if options["json"]:
            self.stdout.write(cli.json_text(result.to_dict()))
        else:
            self.stdout.write("\n".join(cli.terminal_safe(line) for line in _lines(result)))


def _max_header_bytes() -> int:
    try:
        return cli.max_header_bytes()
    except cli.UserError:
        return DEFAULT_MAX_HEADER


def _lines(r: adapt.Result) -> list[str]:
    p = r.plan
    lines = [
        f"Wrote {r.output} ({r.bytes_written:,} bytes): {r.draft} adapted for {r.target} ({p.summary()}).",
    ]
    for c in p.tokens[:SHOWN_TOKENS]:
        types = adapt.type_name(c.draft_type)
        if c.type is not None and c.type != c.draft_type:
            types += f" -> {adapt.type_name(c.type)}"
        lines.append(f"  token {c.id:,}: {quoted(c.draft_text)} -> {quoted(c.text)} ({types})")
    if len(p.tokens) > SHOWN_TOKENS:
        lines.append(f"  … and {len(p.tokens) - SHOWN_TOKENS} more token texts (--json lists them all)")
    lines += [f"  {k.describe()}" for k in p.keys]
    lines += [
        f"  suppress_tokens: {p.suppress_choice}",
        f"  tensor data unchanged: {r.tensors} tensors, each one's name, type, shape, order and sha256 the draft's "
        f"(alignment {r.alignment}; digest {r.tensors_sha256[:16]}…)",
        f"  recorded in the file as specreg.adapted.* (draft sha256 {r.draft_sha256[:16]}…)",
        f"  check_pair TARGET OUTPUT: {r.check.verdict}",
    ]
    return lines
