"""Template filters for numbers people read: parameters, bytes, percentages, speedups."""
from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def params(n: int | None) -> str:
    if not n:
        return "–"
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


@register.filter
def nbytes(n: int | None) -> str:
    if n is None:
        return "–"
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _number(v: object) -> float | None:
    # A missing attribute renders as "" in templates: treat it as no value, not as an error.
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@register.filter
def pct(v: float | None) -> str:
    n = _number(v)
    return "–" if n is None else f"{n * 100:.1f}%"


@register.filter
def times(v: float | None) -> str:
    n = _number(v)
    return "–" if n is None else f"{n:.2f}×"


@register.filter
def ratio(v: float | None) -> str:
    n = _number(v)
    return "–" if n is None else f"{n:.1f}×"


@register.filter
def as_json(v: object) -> str:
    """A metadata value for display (autoescaped by the template like any other string)."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


@register.simple_tag(takes_context=True)
def query(context, **changes) -> str:
    """The current table's query string with some parameters changed (``page``, ``sort``)."""
    from urllib.parse import urlencode

    tq = context["tq"]
    return "?" + urlencode(tq.params(**changes))
