"""Deploying a setting: the llama-server command and systemd unit, and how to get the model files.

The one builder of deployment commands: the pair page (with the pinned build's options) and the
runner (with the options of the binary it measured) both call ``deployment``. Models are named as
a user will have them: a Hub file under ``models/`` exactly where ``hf download … --local-dir
models`` puts it (subfolders kept), a local file by its registered path.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from inspector.hub_names import shard_glob
from inspector.llama_flags import ALL_GPU_LAYERS, Capabilities, server_argv
from inspector.spec_flags import Setting, spec_flags, uses_draft_file
from registry.models import GGUFFile

MODELS_DIR = "models"
# Where a unit's server runs: the folder a user ran ``hf download … --local-dir models`` in, so that the relative
# ``models/…`` paths (and a file name alone, as anonymous visitors see a local file) resolve. systemd wants an absolute
# WorkingDirectory and otherwise starts a service in /, where no model lies; the unit's comment says to change it.
DEPLOY_DIR = "/srv/llama"


@dataclass(frozen=True)
class Deployment:
    argv: tuple[str, ...]
    command: str  # for a shell
    unit: str  # systemd unit file text
    uses_draft: bool


def model_path(f: GGUFFile) -> str:
    """Where the deployed server finds ``f``: ``models/<path in the repo>`` or the local path."""
    return f"{MODELS_DIR}/{f.path}" if f.repo else f.source


def download_command(f: GGUFFile) -> str:
    """The ``hf download`` that puts a Hub file (all shards of a split one) at ``model_path(f)``; "" for local files."""
    if not f.repo:
        return ""
    rev = f" --revision {shlex.quote(f.revision)}" if f.revision else ""
    pattern = f.path if f.split_count == 1 else shard_glob(f.path)
    return f"hf download {shlex.quote(f.repo)} --include {shlex.quote(pattern)}{rev} --local-dir {MODELS_DIR}"


def download_commands(*files: GGUFFile | None) -> str:
    """One ``hf download`` line per distinct Hub file among ``files`` (a target drafting for itself is fetched once),
    in their order; local files and None need none."""
    distinct = {f.pk: f for f in files if f is not None}
    return "\n".join(line for line in map(download_command, distinct.values()) if line)


def _systemd_quote(arg: str) -> str:
    # systemd expands % specifiers and $VARIABLES in ExecStart; double them to keep them literal
    arg = arg.replace("%", "%%").replace("$", "$$")
    if arg and all(c.isalnum() or c in "-_./:=,+@" for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(
    argv: Sequence[str],
    *,
    description: str = "llama.cpp server (configured by specreg)",
    user: str | None = None,
    working_directory: str | None = None,
    environment: dict[str, str] | None = None,
) -> str:
    lines = [
        "[Unit]",
        f"Description={description}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
    ]
    if user:
        lines.append(f"User={user}")
    if working_directory:
        lines += [
            "# The folder holding the model files as ExecStart names them (models/… is where hf download put them)",
            f"WorkingDirectory={working_directory}",
        ]
    for key, value in (environment or {}).items():
        lines.append(f"Environment={_systemd_quote(f'{key}={value}')}")
    lines += [
        f"ExecStart={' '.join(_systemd_quote(a) for a in argv)}",
        "Restart=on-failure",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def deployment(
    caps: Capabilities,
    target: str,
    draft: str | None,
    k: int | None,
    *,
    p_min: float | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    ctx_size: int = 4096,
    threads: int | None = None,
    gpu: bool = False,
    setting: Setting | None = None,
    parallel: int | None = None,
) -> Deployment:
    """``llama-server`` serving ``target``, speculating with ``draft`` at ``k`` (none when ``k`` is None),
    or as ``setting`` says (any method: a draftless one needs no ``draft``).

    ``parallel``: the slots it was measured with (``-np``), each of ``ctx_size`` (``-c`` is their sum, the KV
    cache not unified: llama.cpp's default with an explicit ``-np``), so that what is deployed is what was
    measured; None leaves llama-server's automatic slots (nothing measured says otherwise)."""
    if setting is not None and setting.method != "draft-simple":
        return _method_deployment(
            caps,
            target,
            draft,
            setting,
            host=host,
            port=port,
            ctx_size=ctx_size,
            threads=threads,
            gpu=gpu,
            parallel=parallel,
        )
    if setting is not None:
        k, p_min = setting.k, setting.p_min
    uses = draft is not None and k is not None
    argv = server_argv(
        caps,
        target,
        draft if uses else None,
        k if uses else None,
        p_min=p_min if uses else None,
        ctx_size=ctx_size * (parallel or 1),
        host=host,
        port=port,
        threads=threads,
        gpu_layers=ALL_GPU_LAYERS if gpu else None,
    )
    return _finish(caps, argv, f"speculative K={k}" if uses else "no draft", uses, parallel)


def _finish(caps: Capabilities, argv: list[str], what: str, uses: bool, parallel: int | None) -> Deployment:
    """The command as deployed: named as on a user's PATH, not by the measuring worker's path (so the pair page and
    the run page show the same command), with ``-np N`` where the build knows it (older builds serve one request at
    a time anyway), and its systemd unit."""
    argv[0] = "llama-server"
    slots = ""
    if parallel is not None and caps.has("-np"):
        argv += ["-np", str(parallel)]
        slots = f", {parallel} slots" if parallel > 1 else ""
    desc = f"llama.cpp server, {what}{slots} (configured by specreg)"
    return Deployment(
        tuple(argv), shlex.join(argv), systemd_unit(argv, description=desc, working_directory=DEPLOY_DIR), uses
    )


def _method_deployment(
    caps: Capabilities,
    target: str,
    draft: str | None,
    setting: Setting,
    *,
    host: str,
    port: int,
    ctx_size: int,
    threads: int | None,
    gpu: bool,
    parallel: int | None,
) -> Deployment:
    """A server speculating with a method other than a plain draft model: its --spec-type and options as
    this build's --help names them (a sidecar still comes with -md)."""
    side = draft if uses_draft_file(setting.method) else None
    argv = server_argv(
        caps,
        target,
        None,
        None,
        ctx_size=ctx_size * (parallel or 1),
        host=host,
        port=port,
        threads=threads,
        gpu_layers=ALL_GPU_LAYERS if gpu else None,
    )
    if side is not None:
        argv += [caps.model_draft_flag or "-md", side]
        if gpu and caps.draft_gpu_layers_flag:
            argv += [caps.draft_gpu_layers_flag, str(ALL_GPU_LAYERS)]
    argv += spec_flags(caps, setting)
    return _finish(caps, argv, setting.label, True, parallel)
