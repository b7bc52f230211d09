"""How registered things are named: models (a file name without its quant) and families."""

from __future__ import annotations

import re

# A quantization suffix as GGUF repos write it: -Q4_K_M, .q8_0, -IQ2_XXS, -f16, -BF16, -UD-Q4_K_XL …
_QUANT = re.compile(
    r"[-._](?:ud[-_])?(?:i?q\d[a-z0-9_]*|f16|f32|bf16|fp16|fp32|mxfp4[a-z0-9_]*|tq\d_\d)$", re.IGNORECASE
)
_SHARD = re.compile(r"-\d+-of-\d+$")  # the shard suffix of inspector.hub_names.SHARD, on a stem


def model_name(path: str, fallback: str | None = None) -> str:
    """``qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`` → ``qwen2.5-coder-0.5b-instruct``: quants group together."""
    stem = path.rsplit("/", 1)[-1]
    stem = re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    stem = _SHARD.sub("", stem)
    stripped = _QUANT.sub("", stem)
    return stripped or fallback or stem


def family_key(vocab_key: str, table_sha256: str | None) -> str:
    """Families follow the vocabulary index key; small vocabularies (one shared key) by their table."""
    if vocab_key.endswith(":small") and table_sha256:
        return f"{vocab_key}:{table_sha256[:40]}"
    return vocab_key


def family_name(architecture: str, vocab_type: str, n_vocab: int) -> str:
    """The family's name, from its first file. A family holds vocabularies of several sizes (Qwen2.5's 151,936 and
    152,064 tokens share their texts), so the size is rounded to thousands: which quant came first does not show."""
    size = f"~{round(n_vocab / 1000):,}k" if n_vocab >= 1000 else f"{n_vocab:,}"
    return f"{architecture} · {vocab_type.upper()} · {size} tokens"
