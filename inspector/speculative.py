"""Which speculation method a GGUF file offers llama.cpp, and what that method needs from a target.

Follows the pinned build (b11434): ``common_speculative_types_from_gguf`` in common/speculative.cpp
(what ``-md FILE`` auto-detects), the loaders of the sidecar architectures (src/models/eagle3.cpp,
src/models/dflash.cpp) and the checks the implementations make when they start. Only header facts
are used; what the headers cannot tell is said, not guessed. tests/test_speculative.py compares the
names with the pinned source.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# enum common_speculative_type, by the names --spec-type takes (common_speculative_type_from_name_map).
SPEC_TYPES: tuple[str, ...] = (
    "none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
    "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
)
NGRAM_METHODS: tuple[str, ...] = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
# Auto-detected from the draft's metadata when no --spec-type is given (first shard only); a plain draft
# model and an EAGLE-3 head need the flag.
AUTO_DETECTED = ("draft-mtp", "draft-dflash", "draft-dspark")
DSPARK_TENSOR = "markov_w1.weight"
EAGLE3_LAYERS = 3  # llama_model_eagle3: "EAGLE3 requires exactly 3 entries"


@dataclass
class SpeculativeFacts:
    """What a file offers as ``-md``: the method, how llama.cpp is told, and what the header says of it."""

    type: str | None
    auto_detected: bool
    flag: str  # the --spec-type llama.cpp needs ("" when it detects the method itself)
    explanation: str
    nextn_layers: int | None = None  # MTP heads
    target_layers: list[int] | None = None  # EAGLE-3 / DFlash: the target layers whose states it reads
    target_hidden_size: int | None = None  # EAGLE-3: the target's width it was trained on
    embedding_length: int | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def detect(arch: str, arch_kind: str, kv: dict[str, Any], tensor_names: set[str], first_shard_names: set[str],
           has_tokens: bool) -> SpeculativeFacts:
    """The method a file provides when given to llama.cpp as ``-md``, in llama.cpp's order of deciding."""
    width = _int(kv.get(f"{arch}.embedding_length"))
    if arch == "dflash":
        kind = "draft-dspark" if DSPARK_TENSOR in tensor_names else "draft-dflash"
        layers = _int_list(kv.get("dflash.target_layers"))
        warnings = [] if layers else ["dflash.target_layers is missing: llama.cpp refuses to load the file "
                                      "(\"DFlash model requires 'target_layers' in GGUF metadata\")"]
        what = ("a DSpark sidecar (DFlash with a Markov head)" if kind == "draft-dspark" else "a DFlash sidecar")
        return SpeculativeFacts(kind, True, "", f"{what}: it drafts a block of tokens at once from the target's "
                                f"hidden states; llama.cpp detects it from the file", target_layers=layers,
                                embedding_length=width, warnings=warnings)
    if arch == "eagle3":
        layers = _int_list(kv.get("eagle3.target_layers"))
        hidden = _int(kv.get("eagle3.target_hidden_size"))
        warnings = []
        if layers is None:
            warnings.append("eagle3.target_layers is missing: llama.cpp refuses to load the file")
        elif len(layers) != EAGLE3_LAYERS:
            warnings.append(f"eagle3.target_layers holds {len(layers)} layer ids; llama.cpp requires exactly 3")
        if hidden is None:
            warnings.append("eagle3.target_hidden_size is missing: llama.cpp refuses to load the file")
        return SpeculativeFacts("draft-eagle3", False, "--spec-type draft-eagle3",
                                "an EAGLE-3 head: it drafts from the target's hidden states; llama.cpp does not "
                                "detect it from the file", target_layers=layers,
                                target_hidden_size=hidden, embedding_length=width, warnings=warnings)
    blocks = _int(kv.get(f"{arch}.block_count"))
    head = f"blk.{blocks - 1}.nextn.eh_proj.weight" if blocks else None
    if head is not None and head in tensor_names:
        nextn = _int(kv.get(f"{arch}.nextn_predict_layers"))
        if nextn is None:
            nextn = sum(1 for i in range(blocks) if f"blk.{i}.nextn.eh_proj.weight" in tensor_names)
        auto = head in first_shard_names
        return SpeculativeFacts("draft-mtp", auto, "" if auto else "--spec-type draft-mtp",
                                f"multi-token-prediction heads ({nextn} next-n layer{'s' * (nextn != 1)}): the "
                                "model speculates with its own heads, no second model"
                                + ("" if auto else "; split file: llama.cpp reads only the first shard for "
                                   "detection"), nextn_layers=nextn, embedding_length=width)
    if arch_kind in ("recurrent", "hybrid", "diffusion"):
        return SpeculativeFacts(None, False, "", f"a {arch_kind} architecture ({arch}): not usable as a draft "
                                "model", embedding_length=width)
    if not has_tokens:
        return SpeculativeFacts(None, False, "", "no token table: not usable as a draft model",
                                embedding_length=width)
    return SpeculativeFacts("draft-simple", False, "--spec-type draft-simple",
                            "an ordinary model: usable as a separate draft model for a target with the same "
                            "vocabulary", embedding_length=width)


def draftless_methods(info: Any) -> list[str]:
    """Methods a target can use with no second model: the n-gram family, and its own MTP heads if it has them."""
    if info.arch_kind == "diffusion":
        return []
    own = ["draft-mtp"] if (info.speculative or {}).get("type") == "draft-mtp" else []
    return own + list(NGRAM_METHODS)


@dataclass
class MethodCheck:
    rule: str
    ok: bool | None  # None: the headers cannot tell
    detail: str


def check_method(target: Any, draft: Any) -> list[MethodCheck]:
    """What the pinned build checks when it starts the draft's method against this target, from the headers.

    For draft-simple the six vocabulary rules (inspector.compat) are the whole check: this returns [].
    """
    facts = draft.speculative or {}
    kind = facts.get("type")
    t_blocks, t_width = target.block_count, (target.speculative or {}).get("embedding_length")
    out: list[MethodCheck] = []
    if kind == "draft-eagle3":
        layers, hidden = facts.get("target_layers"), facts.get("target_hidden_size")
        if layers is None or len(layers) != EAGLE3_LAYERS:
            out.append(MethodCheck("eagle3_layers", False, "The EAGLE-3 head must name exactly 3 target layers "
                                   f"(eagle3.target_layers); it names {'none' if layers is None else len(layers)}."))
        elif t_blocks is None:
            out.append(MethodCheck("eagle3_layers", None, "The target's block_count is missing, so its layer ids "
                                   "cannot be checked."))
        else:
            bad = [i for i in layers if not 0 <= i <= t_blocks]
            out.append(MethodCheck("eagle3_layers", not bad,
                                   f"Layer ids {layers} against the target's {t_blocks} blocks: "
                                   + (f"{bad} lie past the target (llama.cpp aborts)." if bad else
                                      "all within the target (an id equal to the block count reads its last output).")))
        out.append(_widths("eagle3_width", hidden, t_width, "The head was trained on a target {ours} wide; this "
                           "target is {target} wide", "its encoder (3 × width inputs) cannot read this target's "
                           "hidden states"))
    elif kind in ("draft-dflash", "draft-dspark"):
        layers = facts.get("target_layers")
        if not layers:
            out.append(MethodCheck("dflash_layers", False, "dflash.target_layers is missing or empty; llama.cpp "
                                   "refuses the file."))
        elif t_blocks is None:
            out.append(MethodCheck("dflash_layers", None, "The target's block_count is missing."))
        else:
            bad = [i for i in layers if not 0 <= i < t_blocks]
            out.append(MethodCheck("dflash_layers", not bad, f"Layer ids {layers} against the target's {t_blocks} "
                                   "blocks: " + (f"{bad} do not exist in the target." if bad else "all exist.")))
        n = len(layers or [])
        out.append(_widths("dflash_width", facts.get("embedding_length"), t_width, f"The sidecar is {{ours}} wide "
                           f"and reads {n} target layers as {n} × its own width; the target is {{target}} wide",
                           "the features would not fit"))
    elif kind == "draft-mtp":
        out.append(_widths("mtp_width", facts.get("embedding_length"), t_width, "The MTP heads take rows {ours} "
                           "wide from the target, which is {target} wide", "they do not fit"))
    return out


def _widths(rule: str, ours: int | None, target: int | None, said: str, mismatch: str) -> MethodCheck:
    """Equal widths pass; ``None`` when the headers lack either (``said`` names both as {ours}/{target})."""
    if ours is None or target is None:
        return MethodCheck(rule, None, "A width (embedding_length or target_hidden_size) is missing from the "
                           "headers, so the widths cannot be compared.")
    return MethodCheck(rule, ours == target, said.format(ours=ours, target=target)
                       + ("." if ours == target else f": {mismatch}."))
