"""JSON values as PostgreSQL's jsonb accepts them."""

from __future__ import annotations

from typing import Any


def json_safe(value: Any) -> Any:
    """PostgreSQL's jsonb refuses NUL in strings, which a hostile header may well contain."""
    if isinstance(value, str):
        return value.replace("\x00", "\\x00") if "\x00" in value else value
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
