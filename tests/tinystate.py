"""Tiny models with recurrent state that the pinned llama.cpp really loads and runs, for the state-kind tests.

A Mamba-2 (recurrent) and an LFM2 (hybrid: short convolutions and attention layers), 2 layers 64 wide, of random
weights, with Qwen2.5's real tokenizer read from the Qwen2.5-Coder-0.5B header the suite already fetches: they share
that vocabulary with the Qwen test models. llama.cpp speculates with both through checkpoints when drafting with a
separate model or an n-gram method. Random weights: whatever such a model measures says nothing of a real model's
speed or acceptance.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFWriter

from tests.models import CACHE, model_path

N_EMBD, D_INNER, D_STATE, N_GROUP, N_HEAD, D_CONV, N_LAYER = 64, 128, 16, 1, 4, 4, 2


def qwen_tokenizer() -> dict[str, Any]:
    """Qwen2.5's tokenizer keys (gguf's reader on the test suite's header of Qwen2.5-Coder-0.5B)."""
    r = GGUFReader(str(model_path("qwen05", headers_only=True)))
    out: dict[str, Any] = {}
    for name, field in r.fields.items():
        if name.startswith("tokenizer."):
            out[name] = field.contents()
    return out


class _Weights:
    """Normal weights of the model of ``base_seed`` (``seed`` without one), with ``noise`` times their scale added
    from a generator of ``seed``'s own: a "perturbed copy" whose agreement with the original falls as noise grows."""

    def __init__(self, seed: int, noise: float, base_seed: int | None) -> None:
        self.rng = np.random.default_rng(seed if base_seed is None else base_seed)
        self.jitter = np.random.default_rng(seed + 1_000_003)
        self.noise = noise

    def normal(self, *shape: int, scale: float) -> np.ndarray:
        w = self.rng.standard_normal(shape).astype(np.float32) * scale
        if self.noise:
            w += self.jitter.standard_normal(shape).astype(np.float32) * scale * self.noise
        return w


def _writer(path: Path, arch: str, seed: int, noise: float) -> GGUFWriter:
    """A writer into ``path``'s temporary name with the keys every tiny model carries first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(path.with_suffix(".tmp")), arch)
    w.add_name(f"specreg tiny {arch} (random weights, seed {seed}, noise {noise})")
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    return w


def _finish(path: Path, w: GGUFWriter, tok: dict[str, Any], tensors: dict[str, np.ndarray]) -> Path:
    """The file type, the tokenizer and the tensors, written; the file moved to ``path`` whole."""
    w.add_file_type(1)
    _tokenizer(w, tok)
    for name, data in tensors.items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    path.with_suffix(".tmp").replace(path)
    return path


def write_mamba2(path: Path, seed: int = 0, noise: float = 0.0, base_seed: int | None = None) -> Path:
    """A Mamba-2 of random weights; with ``noise`` > 0, the model of ``base_seed`` with that much noise added to every
    weight (a "perturbed copy" whose agreement with the original falls as the noise grows)."""
    tok = qwen_tokenizer()
    n_vocab = len(tok["tokenizer.ggml.tokens"])
    normal = _Weights(seed, noise, base_seed).normal
    conv_dim = D_INNER + 2 * N_GROUP * D_STATE
    d_in_proj = D_INNER + conv_dim + N_HEAD

    tensors: dict[str, np.ndarray] = {"token_embd.weight": normal(n_vocab, N_EMBD, scale=1.0).astype(np.float16)}
    for i in range(N_LAYER):
        tensors |= {
            f"blk.{i}.attn_norm.weight": np.ones(N_EMBD, dtype=np.float32),
            f"blk.{i}.ssm_in.weight": normal(d_in_proj, N_EMBD, scale=N_EMBD**-0.5),
            f"blk.{i}.ssm_conv1d.weight": normal(conv_dim, D_CONV, scale=0.5),
            f"blk.{i}.ssm_conv1d.bias": np.zeros(conv_dim, dtype=np.float32),
            f"blk.{i}.ssm_dt.bias": np.full(N_HEAD, -2.0, dtype=np.float32),
            f"blk.{i}.ssm_a": -np.linspace(0.5, 2.0, N_HEAD, dtype=np.float32).reshape(N_HEAD, 1),
            f"blk.{i}.ssm_d": np.ones((N_HEAD, 1), dtype=np.float32),
            f"blk.{i}.ssm_norm.weight": np.ones((N_GROUP, D_INNER // N_GROUP), dtype=np.float32),
            f"blk.{i}.ssm_out.weight": normal(N_EMBD, D_INNER, scale=D_INNER**-0.5),
        }
    tensors["output_norm.weight"] = np.ones(N_EMBD, dtype=np.float32)

    w = _writer(path, "mamba2", seed, noise)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_conv_kernel(D_CONV)
    w.add_ssm_inner_size(D_INNER)
    w.add_ssm_state_size(D_STATE)
    w.add_ssm_time_step_rank(N_HEAD)
    w.add_ssm_group_count(N_GROUP)
    return _finish(path, w, tok, tensors)


def _tokenizer(w: GGUFWriter, tok: dict[str, Any]) -> None:
    w.add_tokenizer_model(str(tok["tokenizer.ggml.model"]))
    w.add_tokenizer_pre(str(tok.get("tokenizer.ggml.pre", "qwen2")))
    w.add_token_list(tok["tokenizer.ggml.tokens"])
    w.add_token_types(tok["tokenizer.ggml.token_type"])
    w.add_token_merges(tok["tokenizer.ggml.merges"])
    for key, add in (
        ("tokenizer.ggml.eos_token_id", w.add_eos_token_id),
        ("tokenizer.ggml.padding_token_id", w.add_pad_token_id),
        ("tokenizer.ggml.bos_token_id", w.add_bos_token_id),
    ):
        if key in tok:
            add(int(tok[key]))
    w.add_add_bos_token(bool(tok.get("tokenizer.ggml.add_bos_token", False)))


def write_lfm2(path: Path, seed: int = 0, noise: float = 0.0, base_seed: int | None = None) -> Path:
    """An LFM2 of random weights: layer 0 a short convolution (recurrent state), layer 1 attention (a KV cache); with
    ``noise``, the model of ``base_seed`` with noise on every weight, as ``write_mamba2``."""
    tok = qwen_tokenizer()
    n_vocab = len(tok["tokenizer.ggml.tokens"])
    normal = _Weights(seed, noise, base_seed).normal
    n_head, n_head_kv, n_ff, l_cache = 4, 2, 128, 3
    head = N_EMBD // n_head

    tensors: dict[str, np.ndarray] = {"token_embd.weight": normal(n_vocab, N_EMBD, scale=1.0).astype(np.float16)}
    for i in range(N_LAYER):
        tensors |= {
            f"blk.{i}.attn_norm.weight": np.ones(N_EMBD, dtype=np.float32),
            f"blk.{i}.ffn_norm.weight": np.ones(N_EMBD, dtype=np.float32),
            f"blk.{i}.ffn_gate.weight": normal(n_ff, N_EMBD, scale=N_EMBD**-0.5),
            f"blk.{i}.ffn_up.weight": normal(n_ff, N_EMBD, scale=N_EMBD**-0.5),
            f"blk.{i}.ffn_down.weight": normal(N_EMBD, n_ff, scale=n_ff**-0.5),
        }
        if i == 0:  # a short convolution: recurrent state
            tensors |= {
                f"blk.{i}.shortconv.conv.weight": normal(N_EMBD, l_cache, scale=0.5),
                f"blk.{i}.shortconv.in_proj.weight": normal(3 * N_EMBD, N_EMBD, scale=N_EMBD**-0.5),
                f"blk.{i}.shortconv.out_proj.weight": normal(N_EMBD, N_EMBD, scale=N_EMBD**-0.5),
            }
        else:
            tensors |= {
                f"blk.{i}.attn_q_norm.weight": np.ones(head, dtype=np.float32),
                f"blk.{i}.attn_k_norm.weight": np.ones(head, dtype=np.float32),
                f"blk.{i}.attn_q.weight": normal(N_EMBD, N_EMBD, scale=N_EMBD**-0.5),
                f"blk.{i}.attn_k.weight": normal(n_head_kv * head, N_EMBD, scale=N_EMBD**-0.5),
                f"blk.{i}.attn_v.weight": normal(n_head_kv * head, N_EMBD, scale=N_EMBD**-0.5),
                f"blk.{i}.attn_output.weight": normal(N_EMBD, N_EMBD, scale=N_EMBD**-0.5),
            }
    tensors["token_embd_norm.weight"] = np.ones(N_EMBD, dtype=np.float32)

    w = _writer(path, "lfm2", seed, noise)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv([0] + [n_head_kv] * (N_LAYER - 1))
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_shortconv_l_cache(l_cache)
    return _finish(path, w, tok, tensors)


def _made(name: str, write: Callable[..., Path], **kw: Any) -> Path:
    """A tiny model made once per machine beside the test models."""
    path = CACHE / "state" / f"{name}.gguf"
    return path if path.is_file() else write(path, **kw)


def lfm2(name: str = "lfm2-tiny", **kw: Any) -> Path:
    return _made(name, write_lfm2, **kw)


def mamba2(name: str = "mamba2-tiny", **kw: Any) -> Path:
    return _made(name, write_mamba2, **kw)
