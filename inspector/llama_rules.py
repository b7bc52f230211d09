"""What llama.cpp (pinned build b11434) makes of a GGUF's tokenizer keys and architecture name.

Copied by reading ``src/llama-vocab.cpp`` (``llama_vocab::impl::load``) and ``src/llama-arch.cpp``
of llama.cpp build 11434; ``tests/inspector/test_llama_source.py`` re-reads those files from the pinned
source and fails when these tables drift. Older builds differ (they always compared BOS/EOS
ids and stored the vocab type differently); specreg follows this build and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

LLAMA_CPP_BUILD = "b11434"
LLAMA_TOKEN_NULL = -1

# tokenizer.ggml.model → llama_vocab_type (name, enum value), as in impl::load.
VOCAB_TYPES: dict[str, tuple[str, int]] = {
    "no_vocab": ("none", 0),
    "none": ("none", 0),
    "llama": ("spm", 1),
    "gpt2": ("bpe", 2),
    "hybriddna": ("bpe", 2),
    "whitespace": ("bpe", 2),
    "gemma4": ("bpe", 2),
    "bert": ("wpm", 3),
    "t5": ("ugm", 4),
    "rwkv": ("rwkv", 5),
    "plamo2": ("plamo2", 6),
    "test": ("test", 7),
}
VOCAB_TYPE_LABELS = {
    "none": "none (no vocabulary)",
    "spm": "SPM (SentencePiece, tokenizer 'llama')",
    "bpe": "BPE (byte-level, tokenizer 'gpt2')",
    "wpm": "WPM (WordPiece, 'bert')",
    "ugm": "UGM (Unigram, 't5')",
    "rwkv": "RWKV",
    "plamo2": "PLaMo-2",
    "test": "test",
}

# Default (bos, eos) ids set per tokenizer model before the keys are read.
DEFAULT_SPECIAL_IDS: dict[str, tuple[int, int]] = {
    "no_vocab": (-1, -1),
    "none": (-1, -1),
    "llama": (1, 2),
    "bert": (101, -1),
    "gpt2": (11, 11),
    "hybriddna": (11, 11),
    "whitespace": (11, 11),
    "t5": (-1, 1),
    "rwkv": (-1, -1),
    "test": (-1, -1),
    "plamo2": (1, 2),
    "gemma4": (-1, -1),
}

# BPE pre-tokenizers llama.cpp knows; any other makes it refuse to load the model.
KNOWN_BPE_PRE = frozenset(
    "default minicpm5 llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 "
    "jina-v5-nano deepseek-llm deepseek-coder deepseek-v3 spark2_5 youtu falcon mpt starcoder "
    "gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert jais-2 "
    "gemma4 granite-embed-multi-311m mmbert sarvam-moe jina-v1-en jina-v2-code roberta-bpe "
    "whitespace refact command-r qwen2 deepseek-r1-qwen kormo f2llmv2 qwen35 stablelm2 olmo dbrx "
    "smaug-bpe poro-chat chatglm-bpe glm4 glm5 viking jais tekken smollm codeshell bloom "
    "gpt3-finnish exaone exaone4 exaone-moe chameleon minerva-7b megrez gpt-4o llama4 kanana2 "
    "talkie granite-embed-multi-97m tiny_aya cohere2moe superbpe trillion granite-docling "
    "bailingmoe bailingmoe2 llada-moe seed-coder hunyuan hunyuan-dense hy_v4 joyai-llm kimi-k2 "
    "ufakzeka grok-2 afmoe laguna minimax-m2 solar-open mellum2".split()
)
# BPE pre-tokenizers that switch add_bos on by default.
BPE_PRE_ADD_BOS = frozenset(
    "llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano tekken chameleon".split()
)
# BPE pre-tokenizers that have no BOS at all by default.
BPE_PRE_NO_BOS = frozenset({"chatglm-bpe", "glm4", "glm5"})
# Pre-tokenizers for which llama.cpp forces add_bos on after reading the keys (Gemma 4).
FORCE_ADD_BOS_PRE = frozenset({"gemma4", "granite-embed-multi-311m"})
# Default (add_bos, add_eos) per vocab type when the pre-tokenizer does not set them.
TYPE_ADD_DEFAULTS: dict[str, tuple[bool, bool]] = {
    "spm": (True, False),
    "wpm": (True, False),
    "ugm": (False, True),
    "rwkv": (False, False),
}

# Architectures (names as in LLM_ARCH_NAMES) from llm_arch_is_recurrent / _hybrid / _diffusion.
RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
HYBRID_ARCHS = frozenset(
    {
        "jamba",
        "falcon-h1",
        "plamo2",
        "granitehybrid",
        "lfm2",
        "lfm2moe",
        "nemotron_h",
        "nemotron_h_moe",
        "qwen3next",
        "kimi-linear",
        "bailingmoe3",
        "kimi-k3",
        "glm5-next",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "deepseek4",
        "minimax-01",
    }
)
DIFFUSION_ARCHS = frozenset({"dream", "llada", "llada-moe", "rnd1"})
# llm_arch_supports_rs_rollback: recurrent state this build can roll back after a rejected draft.
RS_ROLLBACK_ARCHS = frozenset(
    {
        "kimi-k3",
        "qwen35",
        "qwen35moe",
        "qwen4exp",
        "deepseek4",
        "glm5-next",
        "nemotron_h",
        "nemotron_h_moe",
        "lfm2",
        "lfm2moe",
        "bailingmoe3",
    }
)


# llama_model::create_memory (src/llama-model.cpp) returns no memory for these: a context has no cache to roll
# back, common_context_can_seq_rm answers NO, and llama-server serves them without speculation (with a warning).
NO_MEMORY_ARCHS = frozenset(
    {
        "bert",
        "jina-bert-v2",
        "jina-bert-v3",
        "nomic-bert",
        "nomic-bert-moe",
        "neo-bert",
        "eurobert",
        "wavtokenizer-dec",
        "modern-bert",
        "gemma-embedding",
        "dream",
        "llada",
        "llada-moe",
        "rnd1",
        "clef",
    }
)
# Methods for which common_params_speculative::need_n_rs_seq (common/common.h) asks the target's context for
# recurrent-state snapshots; every other method, and every draft context (created with n_rs_seq = 0 in
# common/speculative.cpp), runs a recurrent or hybrid model with checkpoints.
RS_METHODS = frozenset({"draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark"})

# The four ways common_context_can_seq_rm (common/common.cpp) sorts a context, as specreg names them.
STATE_KV = "kv"  # PART: a KV cache; rejected tokens are removed
STATE_ROLLBACK = "rollback"  # RS: bounded rollback from per-token recurrent-state snapshots (n_rs_seq = K)
STATE_CHECKPOINTS = "checkpoints"  # FULL: the recurrent/SWA state is saved before verifying and restored on rejection
STATE_NONE = "none"  # NO: no memory at all; llama.cpp does not speculate
# Worst last: a pair's kind is its worse side's.
STATE_ORDER = (STATE_KV, STATE_ROLLBACK, STATE_CHECKPOINTS, STATE_NONE)
STATE_LABELS = {
    STATE_KV: "KV cache",
    STATE_ROLLBACK: "bounded rollback",
    STATE_CHECKPOINTS: "checkpoints",
    STATE_NONE: "no speculation",
}


def arch_kind(arch: str) -> str:
    """'recurrent', 'hybrid', 'diffusion', 'no-memory' (an encoder-style model without a cache) or
    'transformer' (anything with a plain KV cache)."""
    if arch in RECURRENT_ARCHS:
        return "recurrent"
    if arch in HYBRID_ARCHS:
        return "hybrid"
    if arch in DIFFUSION_ARCHS:
        return "diffusion"
    if arch in NO_MEMORY_ARCHS:
        return "no-memory"
    return "transformer"


# The arch_kinds llama.cpp never speculates with: they have no memory to roll back or checkpoint.
NO_SPECULATION_KINDS = ("diffusion", "no-memory")


def speculates(kind: str) -> bool:
    """Whether llama.cpp speculates with a model of this ``arch_kind`` at all; recurrent and hybrid models do,
    with checkpoints or bounded rollback."""
    return kind not in NO_SPECULATION_KINDS


def state_kind(arch: str, kind: str, role: str, method: str = "draft-simple") -> str:
    """What common_context_can_seq_rm answers for the ``role`` ("target" or "draft") context of a model of this
    architecture (``kind`` is its ``arch_kind``) when speculating with ``method`` (one --spec-type or a chain of them,
    comma-separated: the target gets snapshots when any of them asks, as need_n_rs_seq does)."""
    if not speculates(kind):
        return STATE_NONE
    if kind not in ("recurrent", "hybrid"):
        return STATE_KV
    if role == "target" and RS_METHODS.intersection(method.split(",")) and arch in RS_ROLLBACK_ARCHS:
        return STATE_ROLLBACK
    return STATE_CHECKPOINTS


def worse_state(*kinds: str) -> str:
    return max(kinds, key=STATE_ORDER.index)


@dataclass(frozen=True)
class Effective:
    """The tokenizer values llama.cpp ends up with, and why."""

    vocab_type: str  # spm, bpe, … or "unknown:<model>"
    add_bos: bool
    add_eos: bool
    bos_id: int  # -1 when there is none
    eos_id: int
    bos_defaulted: bool  # the BOS id is llama.cpp's default, not the file's key
    eos_defaulted: bool
    load_error: str | None  # why llama.cpp would refuse this tokenizer, if it would


def effective_tokenizer(
    model: str | None,
    pre: str | None,
    n_tokens: int,
    add_bos_stored: bool | None,
    add_eos_stored: bool | None,
    bos_stored: int | None,
    eos_stored: int | None,
    has_merges: bool = True,
) -> Effective:
    """Apply llama_vocab::impl::load's defaults and overrides to the stored keys."""
    model = model or ""
    pre = pre or ""
    if model not in VOCAB_TYPES:
        return Effective(
            f"unknown:{model}" if model else "missing",
            bool(add_bos_stored),
            bool(add_eos_stored),
            -1,
            -1,
            False,
            False,
            f"llama.cpp does not know tokenizer model {model!r}" if model else "no tokenizer.ggml.model key",
        )
    vtype = VOCAB_TYPES[model][0]
    bos, eos = DEFAULT_SPECIAL_IDS[model]
    if vtype == "none":  # impl::load returns before reading any special-token key
        return Effective(vtype, False, False, -1, -1, False, False, None)
    add_bos, add_eos = False, False
    load_error = None
    if model == "gemma4":
        pre = "gemma4"
    if vtype == "bpe":
        if not has_merges and (model == "gemma4" or pre != "kimi-k2"):
            load_error = "llama.cpp cannot load a BPE vocabulary without tokenizer.ggml.merges"
        if not pre:
            pre = "default"  # llama.cpp warns, then uses the default pre-tokenizer
        elif pre not in KNOWN_BPE_PRE and load_error is None:
            load_error = f"llama.cpp {LLAMA_CPP_BUILD} refuses unknown pre-tokenizer {pre!r}"
        if pre in BPE_PRE_ADD_BOS:
            add_bos = True
        if pre in BPE_PRE_NO_BOS:
            bos = LLAMA_TOKEN_NULL
    else:
        add_bos, add_eos = TYPE_ADD_DEFAULTS.get(vtype, (add_bos, add_eos))

    def special(default: int, stored: int | None) -> tuple[int, bool]:
        if default >= 0 and default >= n_tokens:
            default = LLAMA_TOKEN_NULL  # default out of range: disabled
        if stored is None:
            return default, True
        stored &= 0xFFFFFFFF  # read as uint32: a negative id becomes huge, hence out of range
        if stored >= n_tokens:
            return default, True  # "bad special token … using default id"
        return stored, False

    bos, bos_defaulted = special(bos, bos_stored)
    eos, eos_defaulted = special(eos, eos_stored)
    if add_bos_stored is not None:
        add_bos = bool(add_bos_stored)
    if add_eos_stored is not None:
        add_eos = bool(add_eos_stored)
    if pre in FORCE_ADD_BOS_PRE and vtype == "bpe":
        add_bos = True
    return Effective(vtype, add_bos, add_eos, bos, eos, bos_defaulted, eos_defaulted, load_error)
