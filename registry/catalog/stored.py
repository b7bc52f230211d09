"""Registered files read back from the database: parsed token tables (cached by content) and ModelInfo.

No file is opened: pages, checks and pairing rebuild the inspector's view from stored rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from inspector.info import ModelInfo
from inspector.tokens import TokenTable as Tokens
from registry.models import GGUFFile, TokenTable, TokenTypeTable

_CACHE_SIZE = 8
_tables: OrderedDict[str, Tokens] = OrderedDict()
_tables_lock = threading.Lock()


def remember(sha: str, tokens: Tokens) -> None:
    with _tables_lock:
        _tables[sha] = tokens
        _tables.move_to_end(sha)
        while len(_tables) > _CACHE_SIZE:
            _tables.popitem(last=False)


def tokens_for(table: TokenTable | None) -> Tokens | None:
    """The parsed token table of a stored row, cached by content (rows never change)."""
    if table is None:
        return None
    with _tables_lock:
        hit = _tables.get(table.sha256)
        if hit is not None:
            _tables.move_to_end(table.sha256)
            return hit
    blob = TokenTable.objects.filter(pk=table.pk).values_list("blob", flat=True).get()
    tokens = Tokens(bytes(blob), table.count)
    remember(table.sha256, tokens)
    return tokens


_types: OrderedDict[str, bytes] = OrderedDict()  # token type arrays by sha256, as _tables (guarded by its lock)


def types_for(f: GGUFFile) -> bytes | None:
    """The file's stored token types (little-endian int32s), cached by content; None when none are stored. Read
    apart from ``load_info``: only the adaptability check needs them, and the pairing paths stay one query less."""
    if f.token_types_id is None:
        return None
    sha = TokenTypeTable.objects.filter(pk=f.token_types_id).values_list("sha256", flat=True).first()
    if sha is None:
        return None
    with _tables_lock:
        hit = _types.get(sha)
        if hit is not None:
            _types.move_to_end(sha)
            return hit
    blob = bytes(TokenTypeTable.objects.filter(pk=f.token_types_id).values_list("blob", flat=True).get())
    with _tables_lock:
        _types[sha] = blob
        while len(_types) > _CACHE_SIZE:
            _types.popitem(last=False)
    return blob


def load_info(f: GGUFFile, with_tokens: bool = True) -> ModelInfo:
    """The inspector's view of a registered file, rebuilt from the database (no file is read)."""
    info = ModelInfo.from_dict(f.info, tokens=tokens_for(f.token_table) if with_tokens else None)
    info.source = f.source
    return info
