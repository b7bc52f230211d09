"""Stored adaptability decisions read as they are (``AdaptCheck`` rows): what the table, the API and the pages
show, and the filter that finds adaptable rows. Deciding a missing or stale one is registry.catalog.adaptable's;
this module only reads, so the table's read side shows adaptability without importing the code that decides it.

Only pairs whose first failing rule is bos, eos or token_text can be adaptable (``inspector.adapt.plan`` refuses
every other one before it looks at a token), so only those are looked up.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Protocol

from django.db.models import Exists, F, OuterRef, Q

from inspector.llama_rules import LLAMA_CPP_BUILD
from registry.models import AdaptCheck

CANDIDATE_RULES = ("bos", "eos", "token_text")
# The rules a stored decision was made under: another pinned build or a change of plan's rules decides it again.
VERSION = f"{LLAMA_CPP_BUILD}/adapt-1"

FilePair = tuple[int, int]  # (target file id, draft file id)

# A stored decision still holds: made under these rules, and after both files were last inspected (pages and
# decide_pending read by this one condition).
FRESH = Q(version=VERSION, decided_at__gte=F("target__inspected_at")) & Q(decided_at__gte=F("draft__inspected_at"))


class PairLike(Protocol):
    """A Pair or a table row (registry.table.records.TablePair): what the decision needs of either."""

    pk: int
    compatible: bool
    failed_rule: str


def candidate(compatible: bool, failed_rule: str | None) -> bool:
    """Whether a pair with this verdict could be adaptable at all (see the module's docstring)."""
    return not compatible and (failed_rule or "") in CANDIDATE_RULES


def files_of(p: PairLike) -> FilePair:
    """The (target file, draft file) ids a pair or a table row shows."""
    # A Pair carries the ids without loading its files; a table row carries its files' ids.
    t = getattr(p, "target_id", None)
    d = getattr(p, "draft_id", None)
    if t is None or d is None:
        return (p.target.pk, p.draft.pk)  # type: ignore[attr-defined]
    return (t, d)


def candidates(pairs: Iterable[PairLike]) -> dict[int, FilePair]:
    """The pairs among these that could be adaptable, by pair id, with the two files each shows."""
    return {p.pk: files_of(p) for p in pairs if candidate(p.compatible, p.failed_rule)}


def stored_decisions(wanted: Collection[FilePair]) -> dict[FilePair, AdaptCheck]:
    """The fresh stored decision of each (target file, draft file) that has one: one query."""
    wanted = set(wanted)
    if not wanted:
        return {}
    # By the two id lists rather than an OR per pair (a streamed chunk of 500 rows would nest too deep for SQLite's
    # parser); a row of another combination of the same files is read and left.
    stored = AdaptCheck.objects.filter(FRESH, target_id__in={t for t, _ in wanted}, draft_id__in={d for _, d in wanted})
    return {(r.target_id, r.draft_id): r for r in stored if (r.target_id, r.draft_id) in wanted}


def stored_for_pairs(pairs: Iterable[PairLike]) -> dict[int, AdaptCheck]:
    """The stored decisions of the pairs among these that could be adaptable, by pair id (none decided here)."""
    cands = candidates(pairs)
    found = stored_decisions(set(cands.values()))
    return {pk: found[fp] for pk, fp in cands.items() if fp in found}


def api_value(row: AdaptCheck | None) -> dict[str, Any] | None:
    """The API's ``adaptable``: null, or what adapting changes in a few fields (the page shows the rest)."""
    if row is None or row.state != AdaptCheck.ADAPTABLE or not row.plan:
        return None
    return {
        "changed_tokens": len(row.plan.get("changed_ids") or []),
        "keys": row.plan.get("keys") or [],
        "summary": row.plan.get("summary") or "",
    }


def label(row: AdaptCheck | None) -> str:
    """The table row's words: "adaptable: 7 special tokens, BOS", or "" when it is not."""
    value = api_value(row)
    return f"adaptable: {value['summary']}" if value else ""


def adaptable_rows() -> Q:
    """Pairs whose two shown files have a fresh "adaptable" decision: the table's ``verdict=adaptable`` filter. Read
    from the stored decisions only (a page never decides one), through their (target, draft) index."""
    return Q(compatible=False, failed_rule__in=CANDIDATE_RULES) & Q(
        Exists(
            AdaptCheck.objects.filter(
                FRESH, state=AdaptCheck.ADAPTABLE, target_id=OuterRef("target_id"), draft_id=OuterRef("draft_id")
            )
        )
    )
