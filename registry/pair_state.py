"""A registered pair's state kind (inspector.state) from its two files' stored columns: no inspection is read.

Pages, the API, the CSV and ``find_drafts`` show it beside the verdict: a hybrid or recurrent pair is compatible, and
what it costs to roll back is a matter for measurement, not a reason to refuse it.
"""

from __future__ import annotations

from typing import Protocol

from inspector.state import PairState, pair_state


class _File(Protocol):
    pk: int
    architecture: str
    arch_kind: str
    speculative_type: str


class _Pair(Protocol):
    @property
    def target(self) -> _File: ...
    @property
    def draft(self) -> _File: ...


def state_of(p: _Pair) -> PairState:
    """The state kind of the pair's two files, with the method llama.cpp would run with its draft."""
    return pair_state(p.target, p.draft, p.draft.speculative_type or "draft-simple")
