"""``inspect_gguf`` and ``check_pair`` as plain commands: no Django, and only the imports a source needs.

``manage.py`` hands these two commands here before Django is loaded (setting Django up alone takes
longer than reading two headers); the management commands of the same names call the same
functions, for ``call_command``. Errors are one line on stderr with exit status 2, never a
traceback; everything a file supplies is shown with control characters escaped, so a hostile
header cannot move the cursor or recolour a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from typing import NoReturn, Protocol

from .adapt import adaptability
from .alone import alone_lines, target_alone
from .compat import PairCheck, check_pair, token_label
from .info import InspectError, ModelInfo, inspect_source, shared_deadline
from .tokens import escape_controls, quoted

DEFAULT_MAX_HEADER_BYTES = 256 * 1024 * 1024
MARKS = {True: "ok  ", False: "FAIL", None: "n/a "}
# What json.dumps(ensure_ascii=False) leaves raw: it escapes only C0 controls.
_JSON_RAW = re.compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class UserError(Exception):
    """A failure to report as one line with exit status 2."""


terminal_safe = escape_controls  # control characters (ESC, CR, newlines inside a value, …) as visible escapes


class Writer(Protocol):
    """Where a command prints: sys.stdout, or a management command's OutputWrapper."""

    def write(self, s: str, /) -> object: ...


def json_text(data: object) -> str:
    """Indented JSON for a terminal: UTF-8 kept, every control character escaped (still the same JSON)."""
    # These characters occur only inside strings, where \uXXXX means the same character.
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, indent=2, ensure_ascii=False))


def max_header_bytes() -> int:
    """SPECREG_MAX_HEADER_BYTES, read from the environment as the Django settings read it."""
    value = os.environ.get("SPECREG_MAX_HEADER_BYTES", "")
    try:
        return int(value) if value else DEFAULT_MAX_HEADER_BYTES
    except ValueError:
        raise UserError(f"SPECREG_MAX_HEADER_BYTES: expected an integer, got {value!r}") from None


def inspect(source: str, *, as_json: bool = False, tokens: int = 0, out: Writer) -> int:
    if tokens < 0:
        raise UserError("--tokens must be 0 or more")
    try:
        info = inspect_source(source, max_header_bytes())
    except InspectError as exc:
        raise UserError(str(exc)) from None
    if as_json:
        d = info.to_dict()
        if tokens:
            d["tokens"] = info.token_texts(tokens)
        out.write(json_text(d) + "\n")
    else:
        out.write(format_info(info, tokens) + "\n")
    return 0


def check(target: str, draft: str | None, *, as_json: bool = False, out: Writer) -> int:
    """Exit status 0 compatible, 1 incompatible (an answer, not an error: no error line)."""
    if not draft:
        return draftless(target, as_json=as_json, out=out)
    try:
        with shared_deadline(target, draft) as deadline:  # both files within one deadline
            t = inspect_source(target, max_header_bytes(), deadline=deadline)
            d = inspect_source(draft, max_header_bytes(), deadline=deadline)
    except InspectError as exc:
        raise UserError(str(exc)) from None
    result = check_pair(t, d)
    adaptable = adaptability(t, d, result)
    if as_json:
        out.write(json_text(result.to_dict() | {"adaptable": adaptable}) + "\n")
    else:
        out.write(format_check(result) + "\n")
        if adaptable is not None:
            line = (
                f"  adaptable: {adaptable['summary']}: adapt_draft writes a copy of the draft that llama.cpp accepts "
                f"(python manage.py adapt_draft {shlex.quote(target)} {shlex.quote(draft)} --output OUT.gguf)"
            )
            out.write(terminal_safe(line) + "\n")
    return 0 if result.compatible else 1


def draftless(target: str, *, as_json: bool = False, out: Writer) -> int:
    """The methods TARGET can use with no second model (inspector.alone, as the check page answers); exit 1 when
    there are none."""
    try:
        t = inspect_source(target, max_header_bytes())
    except InspectError as exc:
        raise UserError(str(exc)) from None
    answer = target_alone(t)
    if as_json:
        out.write(json_text(answer) + "\n")
    else:
        lines = [*alone_lines(answer), "Name a DRAFT as well to check a draft model or an EAGLE-3/DFlash sidecar."]
        out.write("\n".join(terminal_safe(line) for line in lines) + "\n")
    return 0 if answer["draftless_methods"] else 1


def _yn(v: bool | None) -> str:
    return "absent" if v is None else ("true" if v else "false")


def _data_line(complete: bool | None) -> str:
    if complete is None:
        return "unchecked (the file's size is unknown)"
    return (
        "all inside the file"
        if complete
        else "CUT SHORT: tensors end past the end of the file (an unfinished download?); llama.cpp will refuse it"
    )


def format_info(info: ModelInfo, n_tokens: int = 0) -> str:
    size = f"{info.file_size:,} bytes" if info.file_size else "unknown size"
    lines = [
        f"{info.source}",
        f"  GGUF v{info.gguf_version} ({info.byteorder}-endian), {size}, header {info.header_size:,} bytes "
        f"({info.bytes_fetched:,} read)",
        f"  architecture  {info.architecture} ({info.arch_kind})",
        f"  name          {info.name or '-'}   basename {info.basename or '-'}   size label {info.size_label or '-'}",
        f"  file type     {info.file_type or '-'}",
        f"  parameters    {info.parameter_count:,} in {info.n_tensors} tensors"
        + (f" over {info.split_count} shards" if info.split_count > 1 else ""),
        f"  context       {info.context_length or '-'}   blocks {info.block_count or '-'}"
        + (f"   experts {info.expert_count} ({info.expert_used_count} used)" if info.expert_count else ""),
    ]
    t = info.tokenizer
    if t is None:
        lines.append("  tokenizer     none in this file")
    else:
        lines += [
            f"  tokenizer     model {t.model!r} ({t.vocab_type}), pre {t.pre!r}, {t.n_tokens:,} tokens",
            f"  add_bos       stored {_yn(t.add_bos_stored)}, llama.cpp applies {_yn(t.add_bos)}",
            f"  add_eos       stored {_yn(t.add_eos_stored)}, llama.cpp applies {_yn(t.add_eos)}",
            f"  BOS / EOS     {token_label(info, t.bos_id)}{' (default)' if t.bos_defaulted else ''} / "
            f"{token_label(info, t.eos_id)}{' (default)' if t.eos_defaulted else ''}  (effective)",
        ]
        for name, sp in t.special.items():
            lines.append(
                f"  {name + ' id':<13} {sp.id} '{sp.text}'"
                if sp.text is not None
                else f"  {name + ' id':<13} {sp.id} (outside the vocabulary)"
            )
        lines.append(f"  vocab key     {t.vocab_key}")
        lines.append(f"  token table   sha256 {t.table_sha256 or '-'}")
        if t.load_error:
            lines.append(f"  WARNING       {t.load_error}")
        if t.chat_template:
            first = t.chat_template.strip().splitlines()[0][:100]
            lines.append(f"  chat template {len(t.chat_template):,} chars: {first}…")
    if n_tokens and info.tokens is not None:
        lines.append(f"  first {min(n_tokens, info.tokens.count)} tokens:")
        for i in range(min(n_tokens, info.tokens.count)):
            lines.append(f"    {i:>7} {quoted(info.tokens.text(i))}")
    lines.append(f"  tensor data   {_data_line(info.data_complete)}")
    spec = info.speculative or {}
    lines.append(
        f"  speculation   {info.speculative_type or 'none'}"
        + (f" ({spec['flag']})" if spec.get("flag") else " (llama.cpp detects it)" if info.speculative_type else "")
        + (f": {spec['explanation']}" if spec.get("explanation") else "")
    )
    for w in spec.get("warnings", []):
        lines.append(f"  WARNING       {w}")
    lines.append("  tensor types  " + ", ".join(f"{k} ×{v}" for k, v in sorted(info.tensor_types.items())))
    return "\n".join(terminal_safe(line) for line in lines)


def format_check(result: PairCheck) -> str:
    lines = [
        f"{result.verdict.capitalize()}: draft {result.draft['source']} for target {result.target['source']} "
        f"(rules of llama.cpp {result.rules_from})",
        f"  method: {result.method} (--spec-type {result.method})",
    ]
    state = result.state
    if state and state.get("kind") != "kv":
        lines.append(f"  state: {state['label']} (target {state['target']}, draft {state['draft']}): {state['cost']}")
    for c in result.checks:
        lines.append(f"  [{MARKS[c.ok]}] {c.rule:<12} {c.detail}")
    for w in result.warnings:
        lines.append(f"  warning ({w.code}): {w.message}")
    return "\n".join(terminal_safe(line) for line in lines)


INSPECT_HELP = (
    "Show a GGUF file's metadata and tokenizer (stored and as llama.cpp applies it). SOURCE is a "
    "local path or hf://OWNER/REPO[@REVISION]/PATH; only the header is read."
)
CHECK_PAIR_HELP = (
    "Check whether DRAFT can draft for TARGET in llama.cpp speculative decoding. Sources are local "
    "paths or hf://OWNER/REPO[@REVISION]/PATH. Exit status: 0 compatible, 1 incompatible, 2 error."
)


def add_inspect_arguments(p: argparse.ArgumentParser) -> None:
    """inspect_gguf's arguments, for this plain command and the management command alike."""
    p.add_argument("source")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--tokens", type=int, default=0, metavar="N", help="also print the first N tokens (default 0: none)")


def add_check_pair_arguments(p: argparse.ArgumentParser) -> None:
    """check_pair's arguments, for this plain command and the management command alike."""
    p.add_argument("target", help="the big model (path or hf:// source)")
    p.add_argument(
        "draft",
        nargs="?",
        help="the small model that proposes tokens (or an EAGLE-3/DFlash sidecar); without it, the methods the "
        "target can use with no second model",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _parser(command: str) -> argparse.ArgumentParser:
    if command == "inspect_gguf":
        p = argparse.ArgumentParser(prog="manage.py inspect_gguf", description=INSPECT_HELP)
        add_inspect_arguments(p)
    else:
        p = argparse.ArgumentParser(prog="manage.py check_pair", description=CHECK_PAIR_HELP)
        add_check_pair_arguments(p)
    p.add_argument("--traceback", action="store_true", help="show the traceback of an unexpected error")

    def one_line_error(message: str) -> NoReturn:
        raise UserError(f"{message} (see --help)")

    p.error = one_line_error  # type: ignore[method-assign]
    return p


def main(argv: list[str]) -> int:
    """``argv[0]`` is the command (inspect_gguf or check_pair); returns the exit status."""
    command, traceback = argv[0], "--traceback" in argv
    try:
        args = _parser(command).parse_args(argv[1:])
        if command == "inspect_gguf":
            return inspect(args.source, as_json=args.json, tokens=args.tokens, out=sys.stdout)
        return check(args.target, args.draft, as_json=args.json, out=sys.stdout)
    except UserError as exc:
        sys.stderr.write(f"{command}: {terminal_safe(str(exc))}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write(f"{command}: interrupted\n")
        return 130
    except Exception as exc:  # a bug, or a failure we did not foresee: still one line
        if traceback:
            raise
        sys.stderr.write(
            f"{command}: unexpected {type(exc).__name__}: {terminal_safe(str(exc))} "
            "(run with --traceback for details)\n"
        )
        return 2


COMMANDS = ("inspect_gguf", "check_pair")
