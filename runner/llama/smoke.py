"""The smoke check: one tiny generation with the installed llama.cpp build, and what to say when a build
crashes on this machine (shared by the install step and the runner's crash diagnosis)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, TokenType
from gguf.quants import quantize

from runner.llama import binaries
from runner.llama.build import ENV_ISA, installed_version, read_record
from runner.llama.procs import describe_exit


def tiny_model(path: Path) -> Path:
    """A 2-layer llama model with Q4_0 weights (random, ~0.5 MB): enough to run every quantized
    matrix kernel the build chose (prompt batches and single tokens), made with gguf in a blink."""
    n_embd, n_ff, n_layer, n_head = 256, 512, 2, 4
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{i:02X}>".encode() for i in range(256)]
    words = ["\u2581hello", "\u2581world", "\u2581the", "\u2581a", "he", "ll", "o", "\u2581"]
    tokens += [w.encode() for w in words]
    while len(tokens) % 32:
        tokens.append(f"\u2581w{len(tokens)}".encode())
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    types += [TokenType.NORMAL] * (len(tokens) - len(types))
    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), "llama")
    w.add_name("specreg smoke check")
    w.add_context_length(256)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(2)  # mostly Q4_0
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(len(tokens) - 259)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def q4(name: str, rows: int, cols: int) -> None:
        data = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
        w.add_tensor(name, quantize(data, Q.Q4_0), raw_dtype=Q.Q4_0)

    def norm(name: str) -> None:
        w.add_tensor(name, np.ones(n_embd, dtype=np.float32))

    q4("token_embd.weight", len(tokens), n_embd)
    for i in range(n_layer):
        norm(f"blk.{i}.attn_norm.weight")
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            q4(f"blk.{i}.{t}.weight", n_embd, n_embd)
        norm(f"blk.{i}.ffn_norm.weight")
        q4(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        q4(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        q4(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    norm("output_norm.weight")
    q4("output.weight", len(tokens), n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@dataclass
class Smoke:
    ok: bool
    message: str  # one line
    rc: int | None = None
    isa: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def illegal_instruction(self) -> bool:
        return self.rc is not None and self.rc < 0 and -self.rc == signal.SIGILL


def installed_isa() -> str:
    """The instruction set of the installed build as recorded, else what its ggml-cpu reports."""
    rec = read_record()
    if rec and rec.get("version") == installed_version() and rec.get("isa"):
        return str(rec["isa"])
    try:
        return binaries.build_isa()
    except Exception:  # noqa: BLE001 - a missing or odd build only loses the label
        return ""


def fix_hint(isa: str) -> str:
    """The command that rebuilds for this machine, from the folder specreg was installed from."""
    if os.environ.get(binaries.ENV_BIN_DIR):
        return (
            f"rebuild the llama.cpp in ${binaries.ENV_BIN_DIR} without -DGGML_NATIVE=ON (e.g. "
            f"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON), or unset {binaries.ENV_BIN_DIR} "
            f"and run `make llama` (specreg's own build for this machine)"
        )
    safer = {"avx512+amx": "avx512", "avx512": "avx2", "native": "avx2", "avx2": "avx", "avx": "sse4.2"}
    target = safer.get(isa, "avx2")
    return f"run `{ENV_ISA}={target} make llama` in the specreg folder (a build without those instructions)"


def sigill_explanation(tool: str, isa: str) -> str:
    """The one explanation of an illegal instruction, shared by the install step and the runner."""
    built = f" ({isa})" if isa else ""
    return (
        f"{tool} was killed by SIGILL: this llama.cpp build{built} uses instructions this machine does not "
        f"allow (a virtual machine can report CPU features it does not enable). Fix: {fix_hint(isa)}"
    )


def smoke(timeout_s: float = 120.0, binary: Path | None = None) -> Smoke:
    """One tiny generation (prompt batch + 8 tokens) with the build the runner uses."""
    try:
        exe = binary or binaries.find_binary(binaries.COMPLETION)
    except binaries.LlamaCppNotFound as exc:
        return Smoke(False, str(exc))
    isa = installed_isa()
    with tempfile.TemporaryDirectory(prefix="specreg-smoke-") as tmp:
        try:
            model = tiny_model(Path(tmp) / "tiny-q4_0.gguf")
        except Exception as exc:  # noqa: BLE001 - the check must say something either way
            return Smoke(False, f"could not write the smoke-check model: {type(exc).__name__}: {exc}", isa=isa)
        argv = [
            str(exe),
            "-m",
            str(model),
            "-p",
            "hello world, the hello world",
            "-n",
            "8",
            "--temp",
            "0",
            "-no-cnv",
            "-t",
            "1",
            "-c",
            "256",
            "--no-warmup",
        ]
        gpu = binaries.build_backend(exe.parent) == "cuda"
        if gpu:  # a GPU build is checked on the GPU: every layer offloaded
            # -lv 4: the pinned build prints its load log ("offloaded 3/3 layers to GPU") at info level only;
            # without it the log holds no offload line, and a working build would be refused
            argv += ["-ngl", "99", "-lv", "4"]
        started = time.monotonic()
        try:
            res = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
                env=_clean_env(),
            )
        except subprocess.TimeoutExpired:
            return Smoke(False, f"{exe.name} did not finish a tiny generation within {timeout_s:g} s", isa=isa)
        except OSError as exc:
            return Smoke(False, f"{exe.name} could not start: {exc}", isa=isa)
    seconds = time.monotonic() - started
    details = {"seconds": round(seconds, 2), "binary": str(exe)}
    if res.returncode == 0 and gpu and (why := _not_offloaded(res.stdout + res.stderr)):
        return Smoke(False, f"{exe.name} is a CUDA build but {why}", res.returncode, isa, details)
    if res.returncode == 0:
        return Smoke(
            True,
            f"llama.cpp ({isa or 'unknown instruction set'}) ran a tiny Q4_0 generation in {seconds:.2f} s",
            0,
            isa,
            details,
        )
    if res.returncode < 0 and -res.returncode == signal.SIGILL:
        return Smoke(False, sigill_explanation(exe.name, isa), res.returncode, isa, details)
    if res.returncode < 0:
        return Smoke(
            False,
            f"{exe.name} {describe_exit(res.returncode)} on a tiny model: this llama.cpp build"
            f"{f' ({isa})' if isa else ''} crashes on this machine, most likely on instructions this "
            f"machine does not allow. Fix: {fix_hint(isa)}",
            res.returncode,
            isa,
            details,
        )
    tail = " | ".join(line for line in (res.stderr or res.stdout).strip().splitlines()[-2:])
    return Smoke(
        False,
        f"{exe.name} {describe_exit(res.returncode)} on a tiny model: {tail[-300:]}",
        res.returncode,
        isa,
        details,
    )


def _clean_env() -> dict[str, str]:
    # LLAMA_ARG_* variables would change what the check runs
    return {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}


# llama.cpp's load log: "load_tensors: offloaded 3/3 layers to GPU"
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def _not_offloaded(log: str) -> str:
    """Why a CUDA build's tiny generation did not run on the GPU, in words; "" when every layer was offloaded."""
    m = _OFFLOADED.search(log)
    if m and int(m[1]) > 0 and m[1] == m[2]:
        return ""
    if "no CUDA-capable device" in log or "failed to initialize CUDA" in log or ("ggml_cuda_init" in log and not m):
        return "no GPU answered it (check nvidia-smi and the driver)"
    return f"it offloaded {m[1]}/{m[2]} layers of the tiny model" if m else "it offloaded nothing to a GPU"
