"""The one deployment builder: llama-server commands from a build's options, systemd units, model names."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from inspector.llama_flags import ALL_GPU_LAYERS, capabilities_from_help, pinned_server_capabilities
from registry.results.deploy import deployment, systemd_unit
from runner.llama import binaries as llamacpp
from runner.llama.output import ServerFigures, parse_server_completion
from tests.local_servers import free_port
from tests.needs import missing


def test_server_command_without_draft():
    help_text = "--spec-draft-n-max N   k\n-md, --model-draft F  d\n"
    caps = capabilities_from_help(Path("/x/llama-server"), help_text)
    argv = deployment(caps, "/m/t.gguf", "/m/d.gguf", None, port=9000, threads=4, gpu=True).argv
    assert "-md" not in argv and "--spec-draft-n-max" not in argv and argv[0] == "llama-server"
    assert argv[argv.index("--port") + 1] == "9000" and argv[argv.index("-t") + 1] == "4"
    assert argv[argv.index("-ngl") + 1] == str(ALL_GPU_LAYERS)


def test_pinned_build_command_uses_the_new_flags_and_quotes_odd_names():
    dep = deployment(pinned_server_capabilities(), "models/sub dir/<t>.gguf", "models/d.gguf", 8)
    assert dep.uses_draft and "--spec-draft-n-max 8" in dep.command and "--spec-type draft-simple" in dep.command
    assert "--draft-max" not in dep.command  # removed in the pinned build
    assert "'models/sub dir/<t>.gguf'" in dep.command


def test_systemd_unit_quoting():
    unit = systemd_unit(["/opt/llama server", "-m", "/m/a b.gguf", "--alias", "50%$HOME"], user="llm")
    assert 'ExecStart="/opt/llama server" -m "/m/a b.gguf" --alias "50%%$$HOME"' in unit
    assert "User=llm" in unit and "[Install]" in unit


def _server_binary() -> Path:
    try:
        return llamacpp.find_binary(llamacpp.SERVER)
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))


@pytest.mark.llama
def test_the_kept_help_of_the_pinned_llama_server_is_the_installed_one():
    caps = llamacpp.capabilities(_server_binary())
    pinned = pinned_server_capabilities()
    assert (caps.options, caps.removed, caps.spec_types) == (pinned.options, pinned.removed, pinned.spec_types)


@pytest.mark.llama
def test_deployed_server_speculates(smollm2_path):
    """The generated llama-server command is accepted by the real build and its timings parse."""
    binary = _server_binary()
    port = free_port()
    dep = deployment(llamacpp.capabilities(binary), str(smollm2_path), str(smollm2_path), 4, port=port, ctx_size=1024)
    proc = subprocess.Popen(
        [str(binary), *dep.argv[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "llama-server exited: the command line was refused"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.3)
        body = json.dumps({"prompt": "Count: 1, 2, 3, 4,", "n_predict": 16, "temperature": 0}).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/completion", data=body, headers={"Content-Type": "application/json"}
        )
        fig = parse_server_completion(json.load(urllib.request.urlopen(req, timeout=60)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert isinstance(fig, ServerFigures) and fig.speculation_ran
    assert fig.predicted_n == 16 and fig.draft_n_accepted >= 0.9 * fig.draft_n and "5, 6" in fig.text
