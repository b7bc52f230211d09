"""Template filters for numbers people read: parameters, bytes, percentages, speedups (registry.formatting)."""

from __future__ import annotations

import json
import shlex
from urllib.parse import urlencode

from django import template

from inspector.info import load_refusal
from inspector.spec_flags import uses_k
from registry.formatting import duration, nbytes, params, pct, ratio, times

register = template.Library()


for _f in (params, nbytes, pct, times, ratio, duration, uses_k):
    register.filter(_f.__name__, _f)


@register.filter
def any_uses_k(methods: object) -> bool:
    """Whether a run's K values size any of its ``methods`` (its params' list; none given: draft-simple)."""
    return any(uses_k(str(m)) for m in (methods if isinstance(methods, list) and methods else ["draft-simple"]))


@register.filter
def shell(v: object) -> str:
    """One shell word: a source (a file or Hub name anyone may choose) in a command a user pastes into a shell, so
    that ``t$(touch x).gguf`` stays a name (autoescaped by the template like any other string)."""
    return shlex.quote(str(v))


@register.filter
def cannot_load(info: object) -> str | None:
    """Why llama.cpp cannot load a registered file, from its stored inspection (inspector.info.load_refusal); None
    when nothing says so. Pages leave out commands that would load such a file."""
    return load_refusal(info) if isinstance(info, dict) else None


@register.filter
def as_json(v: object) -> str:
    """A metadata value for display (autoescaped by the template like any other string)."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


@register.simple_tag(takes_context=True)
def query(context, **changes) -> str:
    """The current table's query string with some parameters changed (``page``, ``sort``)."""

    tq = context["tq"]
    return "?" + urlencode(tq.params(**changes))
