"""What a target can use with no second model: ``check_pair TARGET``'s answer.

One answer for the command line, the check page and ``/api/check`` (a target named without a draft): the JSON
is ``check_pair TARGET --json``'s, and the lines it prints are made from that same JSON, so a page that keeps
only the JSON (a queued check's result) shows what the command prints.
"""

from __future__ import annotations

from typing import Any

from .info import ModelInfo
from .llama_rules import LLAMA_CPP_BUILD, STATE_KV, STATE_LABELS
from .speculative import draftless_methods
from .state import pair_state

NGRAM_NOTE = "The n-gram methods pay where the output repeats the prompt (edits, quoting, code changes)."


def _why(method: str) -> str:
    return "its own multi-token-prediction heads" if method == "draft-mtp" else "n-grams of the text so far"


def target_alone(t: ModelInfo) -> dict[str, Any]:
    """The methods ``t`` can use with no second model, each with its option, why it works and its state kind
    (empty where a KV cache rolls back); ``notes``: what the methods cost; ``none_why``: why there is none."""
    methods = draftless_methods(t)
    states = {m: pair_state(t, t, m) for m in methods}
    notes = [NGRAM_NOTE] if any(m.startswith("ngram-") for m in methods) else []
    notes += [f"State: {c}" for c in dict.fromkeys(s.cost for s in states.values() if s.kind != STATE_KV)]
    return {
        "target": t.source,
        "method": None,
        "draftless_methods": methods,
        "states": {m: states[m].to_dict() for m in methods},
        "speculative": t.speculative,
        "explained": [
            {
                "method": m,
                "flag": f"--spec-type {m}",
                "why": _why(m),
                "state": "" if states[m].kind == STATE_KV else STATE_LABELS[states[m].kind],
            }
            for m in methods
        ],
        "notes": notes,
        "none_why": None if methods else pair_state(t, t).cost,
        "rules_from": LLAMA_CPP_BUILD,
    }


def alone_lines(answer: dict[str, Any]) -> list[str]:
    """``target_alone``'s answer as ``check_pair TARGET`` prints it (unescaped: the caller escapes for its medium)."""
    lines = [f"Methods for {answer['target']} with no second model (rules of llama.cpp {answer['rules_from']}):"]
    for e in answer["explained"]:
        lines.append(f"  {e['method']:<14} {e['flag']:<26} {e['why']}" + (f" ({e['state']})" if e["state"] else ""))
    lines += answer["notes"]
    if answer["none_why"]:
        lines.append(f"  none: {answer['none_why']}")
    return lines
