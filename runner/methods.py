"""Speculation methods as a benchmark dimension: which methods a run measures and which settings of each.

Draft models and MTP heads: each K at each p-min (``--spec-draft-p-min`` decides whether they pay: users
report MTP faster at 0.75 than at the default 0). n-gram methods: their own draft length times one other option of
theirs (the lookup length), at most ``MAX_SETTINGS``; ``ngram-cache`` has no option to sweep. The options themselves
are inspector.spec_flags'. (figures: docs/benchmarks.md, "Figures behind design choices")
"""

from __future__ import annotations

from inspector.spec_flags import (
    NGRAM_CACHE_DRAFT,
    NGRAM_SWEEP,
    OWN_HEADS,
    Setting,
    chain_of,
    chain_parts,
    is_chain,
    known_method,
    uses_draft_file,
)
from inspector.speculative import NGRAM_METHODS, SPEC_TYPES

MAX_SETTINGS = 6
GRID = (1, 2, 4, 8, 12, 16, 24)  # every K a sweep may try (runner.sweep.sweep.next_k walks it)
DEFAULT_KS = (4, 8, 16)  # the Ks a sweep starts from
P_MIN_GRID = (0.0, 0.75)  # llama.cpp's default (0) and the value users report for MTP


class MethodError(ValueError):
    """A method name or combination that cannot be benchmarked; one line."""


def offered_method(f) -> str | None:
    """The method a registered file offers as -md (inspector.speculative), None when it offers none."""
    return ((f.info or {}).get("speculative") or {}).get("type") if f is not None else None


def default_methods(draft_method: str | None, target_has_heads: bool) -> list[str]:
    """Without a draft: the n-gram family (and MTP when the target has heads); with one: its method too."""
    first = [draft_method] if draft_method else ([OWN_HEADS] if target_has_heads else [])
    return first + [m for m in NGRAM_METHODS if m != "ngram-cache"] + ["ngram-cache"]


def check_methods(methods: list[str], *, has_draft: bool) -> list[str]:
    out: list[str] = []
    for m in methods:
        if is_chain(m):
            m = chain_of(chain_parts(m))  # llama.cpp runs a chain in its own priority order, whatever the order given
            if not known_method(m):
                raise MethodError(
                    f"chain {m!r}: specreg measures one n-gram method and one model method together, such as "
                    "ngram-mod+draft-simple"
                )
        elif m not in SPEC_TYPES or m == "none":
            raise MethodError(
                f"unknown speculation method {m!r}; llama.cpp's are: {', '.join(t for t in SPEC_TYPES if t != 'none')}"
                " (a chain: ngram-mod+draft-simple)"
            )
        if uses_draft_file(m) and not has_draft:
            raise MethodError(
                f"{m} needs a draft file: give DRAFT, or choose a draftless method "
                f"({', '.join(NGRAM_METHODS)}, or draft-mtp for a target with MTP heads)"
            )
        if m not in out:
            out.append(m)
    if not out:
        raise MethodError("no speculation method given")
    return out


def settings_for(method: str, ks: list[int], p_mins: list[float | None]) -> list[Setting]:
    """The settings a sweep measures for ``method``: K x p-min for draft models and MTP heads (``ks`` and
    ``p_mins`` as asked), the draft length x one other option for n-gram methods (at most 6)."""
    if method in NGRAM_SWEEP:
        _, lengths, flag, values = NGRAM_SWEEP[method]
        out = [Setting(method, k, None, ((flag, str(v)),)) for v in values for k in lengths]
        return out[:MAX_SETTINGS]
    if method == "ngram-cache":
        return [Setting(method, NGRAM_CACHE_DRAFT)]
    return [Setting(method, k, p) for p in p_mins for k in ks]


def nothing_drafted(method: str, p_min: float | None = None) -> str:
    """Why a measured setting drafted no token, in the words of its method: the run then decoded the target alone,
    so its speed is the target's and it has no speed-up to show."""
    if all(m in NGRAM_METHODS for m in chain_parts(method)):
        return "nothing drafted: the n-gram table found no match in these prompts"
    if p_min:
        return f"nothing drafted: no proposal reached p-min {p_min:g}"
    what = "the MTP heads" if OWN_HEADS in chain_parts(method) else "the draft"
    return f"nothing drafted: {what} proposed no token in these prompts"
