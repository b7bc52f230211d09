"""inspect_gguf SOURCE: everything specreg reads from a GGUF header, above all the tokenizer."""
from __future__ import annotations

import json

from django.conf import settings

from inspector.cli import SpecregCommand, UserError
from inspector.compat import show, token_label
from inspector.info import InspectError, ModelInfo, inspect_source


class Command(SpecregCommand):
    help = ("Show a GGUF file's metadata and tokenizer (stored and as llama.cpp applies it). SOURCE is a "
            "local path or hf://OWNER/REPO[@REVISION]/PATH; only the header is read.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("source")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--tokens", type=int, default=0, metavar="N", help="also print the first N tokens")

    def handle(self, *args, source: str, tokens: int, **options) -> None:
        if tokens < 0:
            raise UserError("--tokens must be 0 or more")
        try:
            info = inspect_source(source, settings.SPECREG_MAX_HEADER_BYTES)
        except InspectError as exc:
            raise UserError(str(exc)) from None
        if options["json"]:
            d = info.to_dict()
            if tokens:
                d["tokens"] = info.token_texts(tokens)
            self.stdout.write(json.dumps(d, indent=2, ensure_ascii=False))
        else:
            self.stdout.write(format_info(info, tokens))


def _yn(v: bool | None) -> str:
    return "absent" if v is None else ("true" if v else "false")


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
            lines.append(f"  {name + ' id':<13} {sp.id} {sp.text!r}" if sp.text is not None
                         else f"  {name + ' id':<13} {sp.id} (outside the vocabulary)")
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
            lines.append(f"    {i:>7} {show(info.tokens.text(i))!r}")
    lines.append("  tensor types  " + ", ".join(f"{k} ×{v}" for k, v in sorted(info.tensor_types.items())))
    return "\n".join(lines)

