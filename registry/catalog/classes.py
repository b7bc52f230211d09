"""Tokenizer classes: files whose compatibility-relevant tokenizer data are identical share one class.

llama.cpp's draft/target rules read only the two tokenizers (vocabulary type, BOS/EOS and whether each is
added, token count, token texts from id 5), so one class stands for every file that carries the same data,
and two classes are candidates for each other when their index key and sizes allow it (±128 tokens), found
by the class index rather than by a scan of files.
"""

from __future__ import annotations

import hashlib
import json

from django.db.models import QuerySet

from inspector.info import ModelInfo
from inspector.tokens import MAX_SIZE_DIFFERENCE, candidate_keys
from registry.models import TokenizerClass, TokenTable


def fingerprint(
    vocab_type: str, n_tokens: int, bos_id: int, eos_id: int, add_bos: bool, add_eos: bool, table_sha256: str
) -> str:
    """The class's identity: a hash over exactly the data the rules read (the token table by its hash)."""
    data = [vocab_type, n_tokens, bos_id, eos_id, bool(add_bos), bool(add_eos), table_sha256]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def class_fields(tok: dict, table: TokenTable | None) -> dict:
    """A class's columns from a tokenizer as stored (``ModelInfo.to_dict()["tokenizer"]``) and its table."""
    vocab_type, vocab_key = str(tok.get("vocab_type") or "")[:32], str(tok.get("vocab_key") or "")[:120]
    n_tokens, bos_id, eos_id = int(tok.get("n_tokens") or 0), int(tok.get("bos_id", -1)), int(tok.get("eos_id", -1))
    add_bos, add_eos = bool(tok.get("add_bos")), bool(tok.get("add_eos"))
    fp = fingerprint(vocab_type, n_tokens, bos_id, eos_id, add_bos, add_eos, table.sha256 if table else "")
    fields = {
        "vocab_type": vocab_type,
        "vocab_key": vocab_key,
        "n_tokens": n_tokens,
        "bos_id": bos_id,
        "eos_id": eos_id,
        "add_bos": add_bos,
        "add_eos": add_eos,
    }
    return {"fingerprint": fp, "token_table": table, **fields}


def class_for(info: ModelInfo, table: TokenTable | None) -> TokenizerClass | None:
    """The file's class, created on first sight (concurrent registrations agree through the unique fingerprint)."""
    if info.tokenizer is None:
        return None
    fields = class_fields(vars(info.tokenizer), table)
    row, _ = TokenizerClass.objects.get_or_create(fingerprint=fields.pop("fingerprint"), defaults=fields)
    return row


def candidate_classes(c: TokenizerClass) -> QuerySet[TokenizerClass]:
    """Classes whose files could pair with ``c``'s: the vocabulary index key(s) and a ±128 size window (none for
    a class without a key: a tokenizer with no vocabulary to compare)."""
    if not c.vocab_key:
        return TokenizerClass.objects.none()
    qs = TokenizerClass.objects.filter(
        vocab_type=c.vocab_type,
        n_tokens__gte=c.n_tokens - MAX_SIZE_DIFFERENCE,
        n_tokens__lte=c.n_tokens + MAX_SIZE_DIFFERENCE,
    )
    keys = candidate_keys(c.vocab_key)
    return qs if keys is None else qs.filter(vocab_key__in=keys)
