"""Registered files read back from the database: parsed token tables (cached by content) and ModelInfo.

No file is opened: pages, checks and pairing rebuild the inspector's view from stored rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from inspector.info import ModelInfo
from inspector.tokens import TokenTable as Tokens
from registry.models import GGUFFile, TokenTable

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


def load_info(f: GGUFFile, with_tokens: bool = True) -> ModelInfo:
    """The inspector's view of a registered file, rebuilt from the database (no file is read)."""
    info = ModelInfo.from_dict(f.info, tokens=tokens_for(f.token_table) if with_tokens else None)
    info.source = f.source
    return info
