"""How llama.cpp rolls a pair's state back after a rejected draft: the architecture rule and its cost.

Build b11434 speculates with every model that has memory (``common_context_can_seq_rm`` in common/common.cpp,
applied to the target's and the draft's context by examples/speculative-simple and tools/server):

- a KV cache (attention-only models) drops the rejected tokens;
- a recurrent or hybrid model is *checkpointed*: its recurrent/SWA state is saved before each draft is verified
  (``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``) and, when the draft is only partly accepted, restored and the accepted
  tokens are passed through the target again;
- a target of an rs-rollback architecture (``llm_arch_supports_rs_rollback``) speculating with its own heads or a
  sidecar keeps K snapshots instead (bounded rollback, ``n_rs_seq`` = K): no restore, no second pass;
- a model with no memory (the BERT family, diffusion models: ``llama_model::create_memory``) is served without
  speculation.

Older llama.cpp builds refused recurrent and hybrid models outright ("rejected drafts corrupt the state"); the
verdict follows the build named in ``rules_from``, and this module says which build's behaviour it describes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from .llama_rules import (
    LLAMA_CPP_BUILD,
    STATE_CHECKPOINTS,
    STATE_KV,
    STATE_LABELS,
    STATE_NONE,
    STATE_ROLLBACK,
    state_kind,
    worse_state,
)


class _Model(Protocol):
    architecture: str
    arch_kind: str


@dataclass(frozen=True)
class PairState:
    """The pair's state kind (its worse side's), each side's, and one line on what it costs."""

    kind: str
    target: str
    draft: str
    cost: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"label": STATE_LABELS[self.kind]}


def _draft_state(draft: _Model, method: str) -> str:
    # Only a separate draft model (draft-simple, alone or in a chain) brings its own architecture's state: MTP heads
    # run in a context of their own layers' KV cache, EAGLE-3/DFlash/DSpark sidecars are attention models.
    if "draft-simple" not in method.split(","):  # n-gram tables have no context to roll back
        return STATE_KV
    return state_kind(draft.architecture, draft.arch_kind, "draft", method)


def _what(model: _Model) -> str:
    if model.arch_kind == "recurrent":
        return "recurrent (SSM/RWKV)"
    if model.arch_kind == "hybrid":
        return "hybrid (attention + recurrent state)"
    if model.arch_kind == "diffusion":
        return "a diffusion model (it does not generate left to right)"
    if model.arch_kind == "no-memory":
        return "a model without a cache (llama.cpp creates no memory for it)"
    return "attention-only"


def pair_state(target: _Model, draft: _Model, method: str = "draft-simple") -> PairState:
    t = state_kind(target.architecture, target.arch_kind, "target", method)
    d = _draft_state(draft, method)
    kind = worse_state(t, d)
    return PairState(kind, t, d, _cost(target, draft, t, d, method))


def _cost(target: _Model, draft: _Model, t: str, d: str, method: str) -> str:
    build = f"llama.cpp {LLAMA_CPP_BUILD}"
    if STATE_NONE in (t, d):
        who = " and ".join(
            f"the {role} ({m.architecture}) is {_what(m)}"
            for role, m, k in (("target", target, t), ("draft", draft, d))
            if k == STATE_NONE
        )
        return f"{_capital(who)}: {build} has no state to roll back, so it does not speculate."
    checkpointed = [
        f"the {role}'s ({m.architecture})"
        for role, m, k in (("target", target, t), ("draft", draft, d))
        if k == STATE_CHECKPOINTS
    ]
    parts = []
    if t == STATE_ROLLBACK:
        parts.append(
            f"{build} keeps K recurrent-state snapshots of the target ({target.architecture}) for {method} "
            "(n_rs_seq = K) and rolls back to the last accepted token: no restore, no second pass"
        )
    if checkpointed:
        parts.append(
            f"{build} speculates with checkpoints: before each draft is verified it saves "
            f"{' and '.join(checkpointed)} recurrent state, and when a draft is only partly accepted it restores "
            "it and passes the accepted tokens through the target again, so the cost is paid on every partial "
            "acceptance and grows with the accepted tokens (older builds refused such pairs)"
        )
    if not parts:
        return "Rejected drafted tokens are removed from the KV cache: rollback costs nothing measurable."
    return _capital("; ".join(parts)) + "."


def architecture_detail(target: _Model, draft: _Model, state: PairState) -> tuple[bool, str]:
    """The architecture rule: fails only where llama.cpp does not speculate at all; otherwise explains the kind."""
    if state.kind == STATE_KV:
        return True, (
            f"Both are attention-only models ({target.architecture}, {draft.architecture}) with a KV cache "
            "that can be rolled back."
        )
    sides = [
        f"the {role} ({m.architecture}) is {_what(m)}"
        for role, m in (("target", target), ("draft", draft))
        if m.arch_kind != "transformer"
    ]
    if state.kind == STATE_NONE:
        return False, state.cost
    how = STATE_LABELS[state.kind]
    return (
        True,
        f"{_capital('; '.join(sides))}: llama.cpp {LLAMA_CPP_BUILD} runs the pair with {how}, "
        "not by trimming a KV cache.",
    )


def _capital(text: str) -> str:
    """The first letter up, except in a name that is written lower-case (llama.cpp)."""
    return text if text.startswith("llama.cpp") else text[:1].upper() + text[1:]


__all__ = [
    "STATE_CHECKPOINTS",
    "STATE_KV",
    "STATE_LABELS",
    "STATE_NONE",
    "STATE_ROLLBACK",
    "PairState",
    "architecture_detail",
]
