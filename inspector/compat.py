"""Draft/target compatibility exactly as llama.cpp's common_speculative_are_compatible, explained.

llama.cpp stops at the first failing rule and reports every failure as "vocab type must match";
here every rule is evaluated and explained, so a user with three problems sees all three.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .info import ModelInfo, TokenizerInfo, size_label_count
from .llama_rules import LLAMA_CPP_BUILD, VOCAB_TYPE_LABELS
from .speculative import check_method
from .state import PairState, architecture_detail, pair_state
from .tokens import CHECK_START_ID, MAX_SIZE_DIFFERENCE, first_text_mismatch, quoted, readable


@dataclass
class Check:
    rule: str
    ok: bool | None  # None: the rule cannot be evaluated for these files
    detail: str


@dataclass
class PairWarning:
    code: str
    message: str


@dataclass
class PairCheck:
    compatible: bool
    llama_cpp_compatible: bool
    rules_from: str
    checks: list[Check]
    failed_rule: str | None
    first_mismatch_token_id: int | None
    first_mismatch: dict[str, str] | None
    target: dict[str, Any]
    draft: dict[str, Any]
    warnings: list[PairWarning] = field(default_factory=list)
    # The method llama.cpp would run with this draft (inspector.speculative): draft-simple unless the
    # draft is an EAGLE-3/DFlash/DSpark sidecar or carries MTP heads; then ``checks`` are that method's.
    method: str = "draft-simple"
    # How llama.cpp rolls the pair back after a rejected draft (inspector.state): beside the verdict, not a verdict.
    state: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def verdict(self) -> str:
        if self.compatible:
            return "compatible"
        return f"incompatible (failed: {self.failed_rule})"


def show(text: bytes | None) -> str:
    """Token text for people (``tokens.readable``), or "(none)"."""
    return "(none)" if text is None else readable(text)


def article(word: str) -> str:
    return "an" if word[0] in "AEIOU" else "a"


def token_label(info: ModelInfo, token_id: int) -> str:
    """A token as people read it: its id and text, or 'none' for llama.cpp's null token."""
    if token_id < 0:
        return "none"
    if info.tokens is None or token_id >= info.tokens.count:
        return f"{token_id}"
    return f"{token_id} {quoted(info.tokens.text(token_id))}"


def _side(info: ModelInfo) -> dict[str, Any]:
    t = info.tokenizer
    return {
        "source": info.source,
        "architecture": info.architecture,
        "vocab_type": t.vocab_type if t else None,
        "n_vocab": t.n_tokens if t else None,
        "add_bos_stored": t.add_bos_stored if t else None,
        "add_bos": t.add_bos if t else None,
        "add_eos_stored": t.add_eos_stored if t else None,
        "add_eos": t.add_eos if t else None,
        "bos_id": t.bos_id if t else None,
        "eos_id": t.eos_id if t else None,
        "vocab_key": t.vocab_key if t else None,
    }


def _architecture(target: ModelInfo, draft: ModelInfo, state: PairState) -> Check:
    ok, detail = architecture_detail(target, draft, state)
    return Check("architecture", ok, detail)


def _missing(target: ModelInfo, draft: ModelInfo, need_table: bool) -> str | None:
    """Why a tokenizer rule cannot be evaluated, or None when it can."""
    for role, info in (("target", target), ("draft", draft)):
        t = info.tokenizer
        if t is None:
            return f"The {role} has no tokenizer metadata (tokenizer.ggml.model is missing)."
        if t.vocab_type.startswith(("unknown:", "missing")):
            return (
                f"The {role}'s tokenizer model {t.model!r} is unknown to llama.cpp {LLAMA_CPP_BUILD}, "
                "which refuses to load it."
            )
        if need_table and info.tokens is None and t.vocab_type != "none":
            return f"The {role} has no token table (tokenizer.ggml.tokens), so its vocabulary cannot be compared."
    return None


def _both(target: ModelInfo, draft: ModelInfo) -> tuple[TokenizerInfo, TokenizerInfo]:
    """The two tokenizers, once ``_missing`` has found both present."""
    t, d = target.tokenizer, draft.tokenizer
    if t is None or d is None:
        raise ValueError("a tokenizer rule ran without both tokenizers")
    return t, d


def _vocab_type(target: ModelInfo, draft: ModelInfo) -> Check:
    if why := _missing(target, draft, need_table=False):
        return Check("vocab_type", None, why)
    tt, dt = _both(target, draft)
    a, b = tt.vocab_type, dt.vocab_type
    la, lb = VOCAB_TYPE_LABELS.get(a, a), VOCAB_TYPE_LABELS.get(b, b)
    if a == b:
        return Check("vocab_type", True, f"Both use a {la} vocabulary.")
    return Check(
        "vocab_type",
        False,
        f"The target uses a {la} vocabulary but the draft uses {lb}; "
        "drafted token ids would mean different text to the target.",
    )


def _special(rule: str, target: ModelInfo, draft: ModelInfo) -> Check:
    if why := _missing(target, draft, need_table=False):
        return Check(rule, None, why)
    tt, dt = _both(target, draft)
    name = rule.upper()
    add_t, add_d = (tt.add_bos, dt.add_bos) if rule == "bos" else (tt.add_eos, dt.add_eos)
    id_t, id_d = (tt.bos_id, dt.bos_id) if rule == "bos" else (tt.eos_id, dt.eos_id)
    if add_t != add_d:
        on, off = ("target", "draft") if add_t else ("draft", "target")
        return Check(
            rule,
            False,
            f"The {on} adds {article(name)} {name} token to every prompt but the {off} does not, so the two "
            f"models would see different prompts (add_{rule}: target {add_t}, draft {add_d}).",
        )
    if not add_t:
        return Check(
            rule,
            True,
            f"Neither adds {article(name)} {name} token (llama.cpp compares {name} ids only when it is added).",
        )
    if id_t != id_d:
        return Check(
            rule,
            False,
            f"Both add a {name} token but with different ids: target {token_label(target, id_t)}, "
            f"draft {token_label(draft, id_d)}.",
        )
    return Check(rule, True, f"Both add {name} {token_label(target, id_t)}.")


def _vocab_size(target: ModelInfo, draft: ModelInfo) -> Check:
    if why := _missing(target, draft, need_table=True):
        return Check("vocab_size", None, why)
    tt, dt = _both(target, draft)
    nt, nd = tt.n_tokens, dt.n_tokens
    diff = abs(nt - nd)
    if diff <= MAX_SIZE_DIFFERENCE:
        same = "the same size" if diff == 0 else f"sizes within {MAX_SIZE_DIFFERENCE} (difference {diff})"
        return Check("vocab_size", True, f"Vocabularies of {nt:,} and {nd:,} tokens: {same}.")
    return Check(
        "vocab_size",
        False,
        f"The target has {nt:,} tokens and the draft {nd:,}: they differ by {diff:,}, "
        f"more than the {MAX_SIZE_DIFFERENCE} llama.cpp allows.",
    )


def _token_text(target: ModelInfo, draft: ModelInfo) -> tuple[Check, Any]:
    if why := _missing(target, draft, need_table=True):
        return Check("token_text", None, why), None
    if target.tokens is None or draft.tokens is None:  # both "none" vocabularies: all texts empty
        return Check("token_text", True, "Neither file has a vocabulary; there are no texts to compare."), None
    n = min(target.tokens.count, draft.tokens.count)
    mm = first_text_mismatch(target.tokens, draft.tokens)
    if mm is None:
        return Check("token_text", True, f"Token texts are identical for ids {CHECK_START_ID} to {n - 1:,}."), None
    return Check(
        "token_text",
        False,
        f"Token {mm.token_id:,} differs: target {quoted(mm.target)}, draft {quoted(mm.draft)} "
        f"(llama.cpp compares ids {CHECK_START_ID} to {n - 1:,}; this is the first difference).",
    ), mm


def _size(info: ModelInfo) -> tuple[int, str]:
    """A model's parameter count and where it comes from when not from its tensors: their elements, else, for a header
    that lists no tensors (an upload of the header alone), what its ``general.size_label`` claims ("0.5B"); 0 when
    neither says."""
    if info.parameter_count:
        return info.parameter_count, ""
    return size_label_count(info.size_label), f" (by its size label {info.size_label})"


def _warnings(target: ModelInfo, draft: ModelInfo) -> list[PairWarning]:
    out = []
    for role, info in (("target", target), ("draft", draft)):
        if info.data_complete is False:
            out.append(
                PairWarning(
                    "data_truncated",
                    f"The {role} {info.source} ends before its tensor data does "
                    "(an unfinished download?): the header can be checked, but llama.cpp cannot load the model.",
                )
            )
    for role, info in (("target", target), ("draft", draft)):
        t = info.tokenizer
        if t and t.bos_defaulted and t.bos_id >= 0:
            used = "and adds it to every prompt" if t.add_bos else "(not added to prompts, since add_bos is off)"
            out.append(
                PairWarning(
                    "bos_default",
                    f"The {role} has no valid tokenizer.ggml.bos_token_id, so llama.cpp uses its "
                    f"default BOS {token_label(info, t.bos_id)} for a {t.model!r} tokenizer {used}.",
                )
            )
        if t and t.load_error:
            out.append(PairWarning("llama_cpp_load_error", f"The {role}: {t.load_error}."))
    (t_count, t_how), (d_count, d_how) = _size(target), _size(draft)
    if d_count and t_count and d_count >= t_count:
        out.append(
            PairWarning(
                "draft_not_smaller",
                f"The draft has {d_count:,} parameters{d_how}, not fewer than the target's {t_count:,}{t_how}: "
                "drafting cannot save time.",
            )
        )
    ct, cd = (
        target.tokenizer.chat_template if target.tokenizer else None,
        draft.tokenizer.chat_template if draft.tokenizer else None,
    )
    if ct != cd:
        out.append(
            PairWarning(
                "chat_template_differs",
                "The chat templates differ; prompts are rendered with the target's "
                "template, so the draft sees text formatted for another model."
                if ct and cd
                else f"Only the {'target' if ct else 'draft'} has a chat template.",
            )
        )
    return out


def check_pair(target: ModelInfo, draft: ModelInfo) -> PairCheck:
    method = (draft.speculative or {}).get("type") or "draft-simple"
    if method != "draft-simple":
        return _check_method(target, draft, method)
    text_check, mm = _token_text(target, draft)
    state = pair_state(target, draft, method)
    checks = [
        _architecture(target, draft, state),
        _vocab_type(target, draft),
        _special("bos", target, draft),
        _special("eos", target, draft),
        _vocab_size(target, draft),
        text_check,
    ]
    failed = next((c.rule for c in checks if c.ok is not True), None)
    return PairCheck(
        compatible=failed is None,
        llama_cpp_compatible=all(c.ok is True for c in checks[1:]),
        rules_from=LLAMA_CPP_BUILD,
        checks=checks,
        failed_rule=failed,
        first_mismatch_token_id=mm.token_id if mm else None,
        first_mismatch={"target": show(mm.target), "draft": show(mm.draft)} if mm else None,
        target=_side(target),
        draft=_side(draft),
        warnings=_warnings(target, draft),
        state=state.to_dict(),
    )


def _check_method(target: ModelInfo, draft: ModelInfo, method: str) -> PairCheck:
    """A sidecar or MTP draft: the checks its method makes when it starts, not the vocabulary rules
    (llama.cpp compares vocabularies only for draft-simple; an EAGLE-3 head may have no token table)."""
    checks = [Check(c.rule, c.ok, c.detail) for c in check_method(target, draft)]
    state = pair_state(target, draft, method)
    arch = _architecture(target, draft, state)
    if arch.ok is False:
        checks.insert(0, arch)
    failed = next((c.rule for c in checks if c.ok is not True), None)
    return PairCheck(
        compatible=failed is None,
        llama_cpp_compatible=all(c.ok is not False for c in checks),
        rules_from=LLAMA_CPP_BUILD,
        checks=checks,
        failed_rule=failed,
        first_mismatch_token_id=None,
        first_mismatch=None,
        target=_side(target),
        draft=_side(draft),
        warnings=[PairWarning("speculative", w) for w in (draft.speculative or {}).get("warnings", [])],
        method=method,
        state=state.to_dict(),
    )
