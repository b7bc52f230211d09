"""Which speculation method a GGUF file offers llama.cpp, and what that method needs from a target.

Follows the pinned build (b11434): ``common_speculative_types_from_gguf`` in common/speculative.cpp
(what ``-md FILE`` auto-detects), the loaders of the sidecar architectures (src/models/eagle3.cpp,
src/models/dflash.cpp) and the checks the implementations make when they start. Only header facts
are used; what the headers cannot tell is said, not guessed. tests/inspector/test_speculative.py compares the
names with the pinned source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .llama_rules import LLAMA_CPP_BUILD, speculates

# enum common_speculative_type, by the names --spec-type takes (common_speculative_type_from_name_map).
SPEC_TYPES: tuple[str, ...] = (
    "none",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
NGRAM_METHODS: tuple[str, ...] = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
SIDECAR_ARCHS = ("eagle3", "dflash")  # general.architecture of EAGLE-3 heads and DFlash/DSpark sidecars
DSPARK_TENSOR = "markov_w1.weight"
EAGLE3_LAYERS = 3  # llama_model_eagle3: "EAGLE3 requires exactly 3 entries"
# Architectures whose graph builds the last block's output as layer input n_layer, so a DFlash id equal
# to n_layer has something to read: src/models/deepseek4.cpp:1330, src/models/mimo2.cpp:238,
# src/models/nemotron-h.cpp:238 (nemotron_h_moe reuses that graph, src/models/models.h:1555).
FINAL_LAYER_INPUT_ARCHS = ("deepseek4", "mimo2", "nemotron_h", "nemotron_h_moe")
# Architectures whose graph exposes its blocks' inputs (res->t_layer_inp[il] = …). Any other target aborts
# at its first decode once an EAGLE-3 or DFlash sidecar asks for one: GGML_ASSERT "layer input tensor is
# null" (src/llama-graph.cpp:1413, run for every graph by src/llama-model.cpp:2915). tests/inspector/test_speculative.py
# derives this list from the pinned source.
LAYER_INPUT_ARCHS = (
    "bailingmoe3",
    "deepseek4",
    "gemma4",
    "gpt-oss",
    "hunyuan-dense",
    "hunyuan_vl",
    "lfm2",
    "lfm2moe",
    "llama",
    "llama-embed",
    "mimo2",
    "minimax-01",
    "minimax-m2",
    "muse-glimmer",
    "nanbeige",
    "nemotron_h",
    "nemotron_h_moe",
    "qwen3",
    "qwen35",
    "qwen35moe",
    "qwen3moe",
    "qwen3next",
    "qwen4exp",
)


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


def detect(
    arch: str, arch_kind: str, kv: dict[str, Any], tensor_names: set[str], first_shard_names: set[str], has_tokens: bool
) -> SpeculativeFacts:
    """The method a file provides when given to llama.cpp as ``-md``, in llama.cpp's order of deciding."""
    width = _int(kv.get(f"{arch}.embedding_length"))
    if arch == "dflash":
        kind = "draft-dspark" if DSPARK_TENSOR in tensor_names else "draft-dflash"
        layers = _int_list(kv.get("dflash.target_layers"))
        warnings = (
            []
            if layers
            else [
                "dflash.target_layers is missing: llama.cpp refuses to load the file "
                "(\"DFlash model requires 'target_layers' in GGUF metadata\")"
            ]
        )
        what = "a DSpark sidecar (DFlash with a Markov head)" if kind == "draft-dspark" else "a DFlash sidecar"
        return SpeculativeFacts(
            kind,
            True,
            "",
            f"{what}: it drafts a block of tokens at once from the target's "
            f"hidden states; llama.cpp detects it from the file",
            target_layers=layers,
            embedding_length=width,
            warnings=warnings,
        )
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
        return SpeculativeFacts(
            "draft-eagle3",
            False,
            "--spec-type draft-eagle3",
            "an EAGLE-3 head: it drafts from the target's hidden states; llama.cpp does not detect it from the file",
            target_layers=layers,
            target_hidden_size=hidden,
            embedding_length=width,
            warnings=warnings,
        )
    blocks = _int(kv.get(f"{arch}.block_count"))
    head = f"blk.{blocks - 1}.nextn.eh_proj.weight" if blocks else None
    if head is not None and head in tensor_names:
        nextn = _int(kv.get(f"{arch}.nextn_predict_layers"))
        if nextn is None and blocks is not None:
            nextn = sum(1 for i in range(blocks) if f"blk.{i}.nextn.eh_proj.weight" in tensor_names)
        auto = head in first_shard_names
        return SpeculativeFacts(
            "draft-mtp",
            auto,
            "" if auto else "--spec-type draft-mtp",
            f"multi-token-prediction heads ({nextn} next-n layer{'s' * (nextn != 1)}): the "
            "model speculates with its own heads, no second model"
            + ("" if auto else "; split file: llama.cpp reads only the first shard for detection"),
            nextn_layers=nextn,
            embedding_length=width,
        )
    if not speculates(arch_kind):
        what = "diffusion" if arch_kind == "diffusion" else "memory-less (no cache)"
        return SpeculativeFacts(
            None, False, "", f"a {what} architecture ({arch}): not usable as a draft model", embedding_length=width
        )
    if not has_tokens:
        return SpeculativeFacts(None, False, "", "no token table: not usable as a draft model", embedding_length=width)
    if arch_kind in ("recurrent", "hybrid"):
        return SpeculativeFacts(
            "draft-simple",
            False,
            "--spec-type draft-simple",
            f"a {arch_kind} model ({arch}): usable as a separate draft model for a target with the same "
            f"vocabulary; llama.cpp {LLAMA_CPP_BUILD} checkpoints its recurrent state each round",
            embedding_length=width,
        )
    return SpeculativeFacts(
        "draft-simple",
        False,
        "--spec-type draft-simple",
        "an ordinary model: usable as a separate draft model for a target with the same vocabulary",
        embedding_length=width,
    )


def draftless_methods(info: Any) -> list[str]:
    """Methods a target can use with no second model: the n-gram family, and its own MTP heads if it has them."""
    if not speculates(info.arch_kind):
        return []
    own = ["draft-mtp"] if (info.speculative or {}).get("type") == "draft-mtp" else []
    return own + list(NGRAM_METHODS)


@dataclass
class MethodCheck:
    rule: str
    ok: bool | None  # None: the headers cannot tell
    detail: str


def target_layer_count(target: Any) -> int | None:
    """llama.cpp's ``hparams.n_layer()``: block_count less the MTP (next-n) blocks, which layer ids never
    name (src/llama-hparams.cpp:348-350; the keys are read at src/llama-model.cpp:1329-1331, next-n
    defaulting to 0)."""
    if target.block_count is None:
        return None
    nextn = _int((target.metadata or {}).get(f"{target.architecture}.nextn_predict_layers")) or 0
    return int(target.block_count) - nextn


def _embd_out(info: Any) -> int | None:
    """``llama_model_n_embd_out``: {arch}.embedding_length_out when set, else embedding_length
    (src/llama-hparams.cpp:136-138)."""
    out = _int((info.metadata or {}).get(f"{info.architecture}.embedding_length_out"))
    return out or (info.speculative or {}).get("embedding_length")


def _layer_check(rule: str, layers: list[int], n_layer: int, nextn: int, top: int, why: str) -> MethodCheck:
    """Ids in 0..top pass; ``why`` says what the ids past ``top`` do."""
    bad = [i for i in layers if not 0 <= i <= top]
    blocks = f"{n_layer} layers" + (f" (its {nextn} MTP block{'s' * (nextn != 1)} not counted)" if nextn else "")
    return MethodCheck(
        rule,
        not bad,
        f"Layer ids {layers} against the target's {blocks}, valid ids 0–{top}: "
        + (f"{bad} {why}." if bad else "all valid."),
    )


@dataclass(frozen=True)
class _Facts:
    """What every method's check reads: the pair's headers, the draft's method facts, the target's layers."""

    target: Any
    draft: Any
    facts: dict[str, Any]
    t_width: int | None  # the target's embedding width
    n_layer: int | None  # the target's transformer blocks (without its MTP blocks)
    nextn: int  # the target's MTP blocks


def check_method(target: Any, draft: Any) -> list[MethodCheck]:
    """What the pinned build checks when it starts the draft's method against this target, from the headers.

    For draft-simple the six vocabulary rules (inspector.compat) are the whole check: this returns [].
    """
    facts = draft.speculative or {}
    check = _METHOD_CHECKS.get(facts.get("type"))
    if check is None:
        return []
    n_layer = target_layer_count(target)
    t_width = (target.speculative or {}).get("embedding_length")
    return check(_Facts(target, draft, facts, t_width, n_layer, (target.block_count or 0) - (n_layer or 0)))


def _check_eagle3(f: _Facts) -> list[MethodCheck]:
    target, facts, t_width, n_layer, nextn = f.target, f.facts, f.t_width, f.n_layer, f.nextn
    out: list[MethodCheck] = []
    layers, hidden = facts.get("target_layers"), facts.get("target_hidden_size")
    if layers is None or len(layers) != EAGLE3_LAYERS:
        out.append(
            MethodCheck(
                "eagle3_layers",
                False,
                "The EAGLE-3 head must name exactly 3 target layers "
                f"(eagle3.target_layers); it names {'none' if layers is None else len(layers)}.",
            )
        )
    elif n_layer is None:
        out.append(
            MethodCheck(
                "eagle3_layers", None, "The target's block_count is missing, so its layer ids cannot be checked."
            )
        )
    else:
        # common/speculative.cpp:600-607: an id below n_layer taps that block's input, an id equal to
        # n_layer the target's last hidden state (llama_set_embeddings_nextn), a larger one GGML_ABORTs;
        # a negative one turns into a huge uint32 and fails GGML_ASSERT(lid <= n_layer)
        # (src/llama-context.cpp:1242).
        out.append(
            _layer_check(
                "eagle3_layers",
                layers,
                n_layer,
                nextn,
                n_layer,
                f"lie past the target (llama.cpp aborts; id {n_layer} is its last hidden state)",
            )
        )
    out.append(
        _widths(
            "eagle3_width",
            hidden,
            t_width,
            "The head was trained on a target {ours} wide; this target is {target} wide",
            "its encoder (3 × width inputs) cannot read this target's hidden states",
        )
    )
    # ids below n_layer are read as layer inputs; id n_layer comes from the last hidden state instead
    if layers and (n_layer is None or any(i < n_layer for i in layers)):
        out.append(_layer_inputs(target.architecture))
    return out


def _check_dflash(f: _Facts) -> list[MethodCheck]:
    target, facts, t_width, n_layer, nextn = f.target, f.facts, f.t_width, f.n_layer, f.nextn
    out: list[MethodCheck] = []
    layers = facts.get("target_layers")
    if not layers:
        out.append(
            MethodCheck("dflash_layers", False, "dflash.target_layers is missing or empty; llama.cpp refuses the file.")
        )
    elif n_layer is None:
        out.append(MethodCheck("dflash_layers", None, "The target's block_count is missing."))
    else:
        # common/speculative.cpp:1116-1117 taps every id as a layer input: ids past n_layer (or negative)
        # fail GGML_ASSERT(lid <= n_layer) (src/llama-context.cpp:1242); id n_layer passes it, but the
        # graph then asserts the tensor was built (src/llama-graph.cpp:1413), which only
        # FINAL_LAYER_INPUT_ARCHS do.
        final = target.architecture in FINAL_LAYER_INPUT_ARCHS
        top = n_layer if final else n_layer - 1
        out.append(
            _layer_check(
                "dflash_layers",
                layers,
                n_layer,
                nextn,
                top,
                "do not exist in the target (llama.cpp aborts)"
                + (
                    ""
                    if final
                    else f"; id {n_layer} (the last block's output) is built "
                    f"only by {', '.join(FINAL_LAYER_INPUT_ARCHS)}, not {target.architecture}"
                ),
            )
        )
    n = len(layers or [])
    out.append(
        _widths(
            "dflash_width",
            facts.get("embedding_length"),
            t_width,
            f"The sidecar is {{ours}} wide "
            f"and reads {n} target layers as {n} × its own width; the target is {{target}} wide",
            "the features would not fit",
        )
    )
    if layers:
        out.append(_layer_inputs(target.architecture))
    return out


def _check_mtp(f: _Facts) -> list[MethodCheck]:
    target, draft = f.target, f.draft
    out: list[MethodCheck] = []
    # GGML_ASSERT(n_embd_out(draft) == n_embd_out(target)), common/speculative.cpp:1436-1438
    out.append(
        _widths(
            "mtp_width",
            _embd_out(draft),
            _embd_out(target),
            "The MTP heads take rows {ours} wide from the target, which is {target} wide",
            'they do not fit (llama.cpp aborts: "MTP input row width must match the target h_nextn width")',
        )
    )
    return out


_METHOD_CHECKS: dict[Any, Callable[[_Facts], list[MethodCheck]]] = {
    "draft-eagle3": _check_eagle3,
    "draft-dflash": _check_dflash,
    "draft-dspark": _check_dflash,
    "draft-mtp": _check_mtp,
}


def _layer_inputs(arch: str) -> MethodCheck:
    ok = arch in LAYER_INPUT_ARCHS
    return MethodCheck(
        "target_layer_inputs",
        ok,
        f"The sidecar reads the target's layer inputs; llama.cpp's {arch} "
        + (
            "graph provides them."
            if ok
            else 'graph does not, so llama.cpp aborts ("layer input tensor is null") at the target\'s first decode.'
        ),
    )


def _widths(rule: str, ours: int | None, target: int | None, said: str, mismatch: str) -> MethodCheck:
    """Equal widths pass; ``None`` when the headers lack either (``said`` names both as {ours}/{target})."""
    if ours is None or target is None:
        return MethodCheck(
            rule,
            None,
            "A width (embedding_length or target_hidden_size) is missing from the "
            "headers, so the widths cannot be compared.",
        )
    return MethodCheck(
        rule, ours == target, said.format(ours=ours, target=target) + ("." if ours == target else f": {mismatch}.")
    )
