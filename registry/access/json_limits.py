"""The JSON API's parser: DRF's, with a nesting limit, so a deeply nested body is a 400, not a 500.

Python's json module recurses once per level: 100,000 nested arrays raise RecursionError, which DRF
does not turn into a ParseError. Real API bodies (notes, deployments, reported results) are a few
levels deep; anything past MAX_DEPTH is refused with one line.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import exception_handler

MAX_DEPTH = 32


def depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar is 0), walked without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON nested too deeply: at most {MAX_DEPTH} levels of lists and objects") from None
        if depth(data) > MAX_DEPTH:
            raise ParseError(f"JSON nested too deeply: at most {MAX_DEPTH} levels of lists and objects")
        return data


def api_exception_handler(exc, context):
    """DRF's handler, but a body that cannot be parsed answers in the API's one error shape ``{"error": …}``."""

    if isinstance(exc, ParseError):
        return Response({"error": str(exc.detail)}, status=400)
    return exception_handler(exc, context)
