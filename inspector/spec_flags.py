"""How llama.cpp is told to speculate one way: a method of the pinned build (b11434: common/arg.cpp,
common/speculative.cpp) with its draft length and options, as ``llama-speculative-simple`` and
``llama-server`` options. The runner measures settings; the deployment builder writes the same ones.

A draft model (and an EAGLE-3/DFlash sidecar, and a model's own MTP heads) is sized by
``--spec-draft-n-max`` (K) and thinned by ``--spec-draft-p-min``. The n-gram methods ignore both: their
"K" is their own draft length (``--spec-ngram-mod-n-max``, ``--spec-ngram-*-size-m``); ``ngram-cache``
drafts a fixed 8 tokens and has no option for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from .llama_flags import Capabilities, LlamaCppError, k_flags
from .speculative import NGRAM_METHODS

DRAFT_MODEL_METHODS = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")  # need -md FILE
OWN_HEADS = "draft-mtp"  # the target's own heads: no second file

# method -> (its draft-length option, the lengths tried, the second option, its values). Lengths start
# at a few tokens (short repeats still pay) and end at llama.cpp's default (long repeats pay most).
NGRAM_SWEEP: dict[str, tuple[str, tuple[int, ...], str, tuple[int, ...]]] = {
    # n_max=64, n_min=48, n_match=24 by default; n_match below 16 draws llama.cpp's "poor quality" warning
    "ngram-mod": ("--spec-ngram-mod-n-max", (8, 16, 64), "--spec-ngram-mod-n-match", (16, 24)),
    # size_n=12 (lookup) and size_m=48 (drafted) by default
    "ngram-simple": ("--spec-ngram-simple-size-m", (8, 16, 48), "--spec-ngram-simple-size-n", (6, 12)),
    "ngram-map-k": ("--spec-ngram-map-k-size-m", (8, 16, 48), "--spec-ngram-map-k-size-n", (6, 12)),
    "ngram-map-k4v": ("--spec-ngram-map-k4v-size-m", (8, 16, 48), "--spec-ngram-map-k4v-size-n", (6, 12)),
}
NGRAM_CACHE_DRAFT = 8  # create_state_ngram_cache: "uint16_t n_draft = 8; // TODO get from config?"
MAX_K = 64  # the benchmark's bound on K: every argv built from a stored or imported setting keeps it too
MAX_OPTION_DIGITS = 6  # an option's value: a size in tokens, never more than six digits


def option_flags(method: str) -> frozenset[str]:
    """The options a setting of ``method`` may carry besides K and p-min: an n-gram method's second size, the only
    ones the runner's sweep writes (runner.methods.settings_for); every other method carries none."""
    return frozenset({NGRAM_SWEEP[method][2]}) if method in NGRAM_SWEEP else frozenset()


def is_option(option: object) -> TypeGuard[tuple[str, str] | list[str]]:
    """Whether ``option`` is a (flag, value) pair of strings. A stored row's options are JSON: one imported before
    imports checked them, or written by hand, may hold a list of any length."""
    return isinstance(option, (tuple, list)) and len(option) == 2 and all(isinstance(w, str) for w in option)


def own_option(method: str, option: object) -> bool:
    """Whether ``option`` is one of the method's own options (``option_flags``) with a value of ASCII digits: the
    only options specreg's runs write, so the only ones an imported record or a rebuilt command may carry."""
    if not is_option(option):
        return False
    flag, value = option
    return flag in option_flags(method) and value.isascii() and value.isdigit() and len(value) <= MAX_OPTION_DIGITS


def _option_text(option: object) -> str:
    if is_option(option):
        flag, value = option
        return f"{flag.removeprefix('--spec-')}={value}"
    return "(malformed option)"  # shown for what it is: a page must not fail on a row it did not write


@dataclass(frozen=True)
class Setting:
    """One way of running a method: its draft length K and its other options (flag, value)."""

    method: str
    k: int
    p_min: float | None = None  # draft models and MTP heads only
    options: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        parts = [self.method, f"K={self.k}"]
        if self.p_min is not None:
            parts.append(f"p-min={self.p_min:g}")
        parts += [_option_text(o) for o in self.options]
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "k": self.k, "p_min": self.p_min, "options": [list(o) for o in self.options]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Setting:
        return Setting(
            d["method"], int(d["k"]), d.get("p_min"), tuple((str(f), str(v)) for f, v in d.get("options", ()))
        )


# A chain of methods, as llama.cpp's --spec-type takes a comma list: common_speculative_init orders them by a fixed
# priority (the n-gram types first, then draft-simple, eagle3, mtp, dflash, dspark) and each round the first that
# returns a non-empty draft is used, while every one of them still processes the round. specreg names a chain with
# "+" (a comma separates methods in its own lists: --methods, CSV) in that priority order: "ngram-mod+draft-simple".
CHAIN = "+"
PRIORITY = (*NGRAM_METHODS, "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")


def chain_parts(method: str) -> list[str]:
    """The methods of a chain (one method is a chain of one)."""
    return method.split(CHAIN)


def is_chain(method: str) -> bool:
    return CHAIN in method


def chain_of(methods: list[str]) -> str:
    """A chain's name: its methods in llama.cpp's priority order (the order it runs them whatever the order given)."""
    return CHAIN.join(sorted(dict.fromkeys(methods), key=lambda m: PRIORITY.index(m) if m in PRIORITY else 99))


def known_method(method: str) -> bool:
    """A --spec-type of the pinned build, or a chain specreg measures: one n-gram method and one model method (a
    draft model or the target's own heads), in llama.cpp's order."""
    if not is_chain(method):
        return method in PRIORITY or method == "none"
    parts = chain_parts(method)
    return (
        len(parts) == 2
        and parts[0] in NGRAM_METHODS
        and parts[1] in ("draft-simple", OWN_HEADS)
        and chain_of(parts) == method
    )


def chain_beats_parts(method: str, slowest: float | None, alone: list[float]) -> bool:
    """Whether ``method``, if a chain, measurably beat its methods alone: its slowest interleaved pair (``slowest``)
    faster than the fastest of ``alone`` (its methods' own speed-ups). A chain's cost (the draft model takes in every
    round) is easy to mistake for noise, so a run's recommendation and a pair page's both ask this. A single method,
    a chain none of whose methods was measured alone, or one with no pair to judge by passes."""
    if not is_chain(method) or slowest is None or not alone:
        return True
    return slowest > max(alone)


def uses_draft_file(method: str) -> bool:
    return any(m in DRAFT_MODEL_METHODS for m in chain_parts(method))


def is_draftless(method: str) -> bool:
    return all(m in NGRAM_METHODS or m == OWN_HEADS for m in chain_parts(method))


def uses_k(method: str) -> bool:
    """Whether a run's K (``--spec-draft-n-max``) sizes ``method``'s drafts: a draft model, a sidecar, the target's
    own MTP heads, or a chain with one of them. The n-gram methods ignore it: their setting carries their own draft
    length, so a page lists the run's K values only beside methods that take them."""
    return not all(m in NGRAM_METHODS for m in chain_parts(method))


def alone_label(methods: list[str]) -> str:
    """What a run of draftless ``methods`` measures, named after what drafts: "n-gram", "own MTP heads", or both."""
    parts = [m for ms in methods for m in chain_parts(ms)]
    kinds = (["own MTP heads"] if OWN_HEADS in parts else []) + (
        ["n-gram"] if any(m in NGRAM_METHODS for m in parts) else []
    )
    return " and ".join(kinds) or "no draft"


def draft_label(method: str) -> str:
    """What the table shows in the draft column for a draftless method."""
    return "own MTP heads" if method == OWN_HEADS else "none (n-gram)"


def spec_flags(caps: Capabilities, setting: Setting) -> list[str]:
    """The options that make ``caps.binary`` speculate as ``setting`` says (no model options)."""
    m = setting.method
    if not all(is_option(o) for o in setting.options):  # a malformed stored row never reaches an argv
        raise LlamaCppError(f"{m}: a stored option is not a (flag, value) pair of strings")
    for part in chain_parts(m):
        if caps.spec_types and part not in caps.spec_types:
            raise LlamaCppError(
                f"{caps.binary.name} does not offer --spec-type {part} (it offers {', '.join(caps.spec_types)})"
            )
    if is_chain(m) and not known_method(m):
        raise LlamaCppError(f"{m}: specreg runs a chain of one n-gram method and one model method")
    if m in NGRAM_SWEEP or m == "ngram-cache":
        if not caps.has("--spec-type"):
            raise LlamaCppError(f"{caps.binary.name} has no --spec-type: it cannot run {m}")
        argv = ["--spec-type", m]
        if m in NGRAM_SWEEP:
            length_flag = NGRAM_SWEEP[m][0]
            argv += [length_flag, str(setting.k)]
            if m == "ngram-mod":
                # n_min (default 48) above n_max would make every draft shorter than asked fail
                argv += ["--spec-ngram-mod-n-min", str(min(48, max(1, setting.k // 2)))]
        for flag, value in setting.options:
            argv += [flag, value]
        return argv
    # draft models, sidecars and MTP heads share K and p-min, and so does a chain, whose n-gram method keeps
    # llama.cpp's own lengths; the type is named explicitly (a plain draft and EAGLE-3 are never auto-detected,
    # and naming the others costs nothing), a chain as the comma list llama.cpp takes
    argv = k_flags(caps, setting.k, 0, setting.p_min)
    if "--spec-type" in argv:
        i = argv.index("--spec-type")
        argv = argv[:i] + argv[i + 2 :]
    if caps.has("--spec-type"):
        argv += ["--spec-type", ",".join(chain_parts(m))]
    elif m != "draft-simple":
        raise LlamaCppError(f"{caps.binary.name} has no --spec-type: it cannot run {m}")
    return argv + [f for flag, value in setting.options for f in (flag, value)]
