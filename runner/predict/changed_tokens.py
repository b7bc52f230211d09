"""How an adapted draft does where the target writes a token whose meaning changed for it.

``manage.py adapt_draft`` gives a near-miss draft the target's special tokens: the ids it lists in
``specreg.adapted.changed_ids`` now carry the target's texts, but the draft's weights learned them as its own (the
target's ``<think>`` is a token the draft never saw as such). A prediction's totals hide those few positions, and
llama.cpp reports totals only, so this counts them apart from the draft's teacher-forced pass: at each transcript
position whose true token is a changed id, whether the draft's top proposal was that token (what decides whether a
draft reaching that position is accepted), beside the same rate over every position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.adapt import PREFIX
from inspector.info import InspectError, inspect_source

CHANGED_IDS = PREFIX + "changed_ids"
LOW_BY = 0.10  # a rate this far below the overall one is called low: the changed tokens cost acceptance


def adapted_ids(draft: Path | str) -> frozenset[int]:
    """The ids an adapted draft's metadata says changed meaning; empty for any other file (or one that cannot be
    read now: the prediction itself then fails on it with llama.cpp's own words)."""
    try:
        meta = inspect_source(str(draft)).metadata
    except InspectError:
        return frozenset()
    ids = meta.get(CHANGED_IDS)
    if not isinstance(ids, list):  # absent, or an array too large to have been decoded (adapt_draft caps it)
        return frozenset()
    return frozenset(int(i) for i in ids if isinstance(i, int))


@dataclass
class ChangedTally:
    """Per content type: positions whose true token changed meaning, and every position, with the draft's hits."""

    positions: int = 0
    agree: int = 0
    all_positions: int = 0
    all_agree: int = 0

    def add(self, proposed: Sequence[int], truth: Sequence[int], changed: frozenset[int]) -> None:
        """One task's forced pass: ``proposed[i]`` the draft's top token where ``truth[i]`` was written."""
        for p, t in zip(proposed, truth, strict=False):
            hit = p == t
            self.all_positions += 1
            self.all_agree += hit
            if t in changed:
                self.positions += 1
                self.agree += hit

    def to_dict(self) -> dict[str, Any]:
        rate = self.agree / self.positions if self.positions else None
        overall = self.all_agree / self.all_positions if self.all_positions else None
        low = rate is not None and overall is not None and rate < overall - LOW_BY
        return {
            "positions": self.positions,
            "draft_agrees": self.agree,
            "rate": None if rate is None else round(rate, 4),
            "overall_rate": None if overall is None else round(overall, 4),
            "low": low,
        }
