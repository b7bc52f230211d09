"""llama.cpp's command-line options, read from a binary's ``--help``, and the argument lists built from them.

Flags change between builds (``--draft-max`` became ``--spec-draft-n-max``; removed options stay in
``--help`` marked "the argument has been removed"), so every command specreg writes is built from
the options a binary lists. ``pinned_server_capabilities`` gives those of the pinned build's
``llama-server`` (its ``--help`` is kept in ``data/``) for pages that recommend a command without
a binary at hand; the runner uses the binary it actually runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .llama_rules import LLAMA_CPP_BUILD

ALL_GPU_LAYERS = 999  # "offload everything"; older builds do not know "all"
PINNED_SERVER_HELP = Path(__file__).with_name("data") / f"llama-server-help-{LLAMA_CPP_BUILD}.txt"


class LlamaCppError(RuntimeError):
    """A llama.cpp binary did not answer as expected, or lacks an option a command needs; one line."""


_OPTION_LINE = re.compile(r"^ {0,4}(-{1,2}[A-Za-z0-9][^\s,]*(?:,\s*-{1,2}[A-Za-z0-9][^\s,]*)*)(.*)$")
_FLAG = re.compile(r"-{1,2}[A-Za-z0-9][\w-]*")
REMOVED_MARK = "the argument has been removed"


@dataclass(frozen=True)
class HelpOption:
    names: tuple[str, ...]
    value: str  # the placeholder, e.g. "N" or "[none|draft-simple|...]"
    description: str

    @property
    def removed(self) -> bool:
        return REMOVED_MARK in self.description


def parse_help(text: str) -> list[HelpOption]:
    """Options of a llama.cpp ``--help`` page with their (possibly multi-line) descriptions."""
    options: list[HelpOption] = []
    current: list[Any] = []
    for line in text.splitlines():
        m = _OPTION_LINE.match(line)
        if m:
            if current:
                options.append(HelpOption(current[0], current[1], " ".join(current[2]).strip()))
            names = tuple(n.strip() for n in m.group(1).split(","))
            rest = m.group(2)
            # the value placeholder sits right after the names, the description after a run of spaces
            parts = re.split(r"\s{2,}", rest.strip(), maxsplit=1)
            value = parts[0] if parts and not rest.startswith("  ") else ""
            desc = parts[-1] if len(parts) > 1 or rest.startswith("  ") else ""
            current = [names, value, [desc]]
        elif current and line.strip():
            current[2].append(line.strip())
    if current:
        options.append(HelpOption(current[0], current[1], " ".join(current[2]).strip()))
    return options


@dataclass(frozen=True)
class Capabilities:
    """Which options one binary accepts; options marked removed in ``--help`` count as absent."""

    binary: Path
    options: frozenset[str]
    removed: frozenset[str]
    spec_types: tuple[str, ...] = ()
    help_ok: bool = True
    notes: tuple[str, ...] = field(default=())

    def has(self, flag: str) -> bool:
        return flag in self.options and flag not in self.removed

    def first(self, *flags: str) -> str | None:
        return next((f for f in flags if self.has(f)), None)

    @property
    def draft_max_flag(self) -> str | None:
        return self.first("--spec-draft-n-max", "--draft-max", "--draft")

    @property
    def draft_min_flag(self) -> str | None:
        return self.first("--spec-draft-n-min", "--draft-min")

    @property
    def p_min_flag(self) -> str | None:
        return self.first("--spec-draft-p-min", "--draft-p-min")

    @property
    def model_draft_flag(self) -> str | None:
        return self.first("-md", "--model-draft", "--spec-draft-model")

    @property
    def draft_gpu_layers_flag(self) -> str | None:
        return self.first("-ngld", "--spec-draft-ngl", "--gpu-layers-draft", "--n-gpu-layers-draft")

    @property
    def spec_type_draft(self) -> bool:
        """Whether ``--spec-type draft-simple`` must and can be given (new builds refuse to speculate without it)."""
        return self.has("--spec-type") and (not self.spec_types or "draft-simple" in self.spec_types)

    @property
    def new_style(self) -> bool:
        return self.draft_max_flag == "--spec-draft-n-max"


def capabilities_from_help(binary: Path, text: str) -> Capabilities:
    options: set[str] = set()
    removed: set[str] = set()
    spec_types: tuple[str, ...] = ()
    for opt in parse_help(text):
        options.update(opt.names)
        if opt.removed:
            removed.update(opt.names)
        if "--spec-type" in opt.names:
            spec_types = tuple(v for v in re.split(r"[\[\]|,\s]+", opt.value) if v)
    return Capabilities(binary, frozenset(options), frozenset(removed), spec_types, help_ok=bool(options))


@lru_cache(maxsize=1)
def pinned_server_capabilities() -> Capabilities:
    """The options of the pinned build's ``llama-server`` (as its ``--help`` lists them)."""
    return capabilities_from_help(Path("llama-server"), PINNED_SERVER_HELP.read_text())


def num(x: float) -> str:
    return f"{x:g}"


def k_flags(caps: Capabilities, k: int, k_min: int | None, p_min: float | None) -> list[str]:
    if caps.draft_max_flag is None:
        raise LlamaCppError(
            f"{caps.binary.name} accepts no draft-size option (neither --spec-draft-n-max nor --draft-max)"
        )
    argv = [caps.draft_max_flag, str(k)]
    if k_min is not None and caps.draft_min_flag:
        argv += [caps.draft_min_flag, str(k_min)]
    if p_min is not None:
        if caps.p_min_flag is None:
            raise LlamaCppError(f"{caps.binary.name} accepts no draft p-min option")
        argv += [caps.p_min_flag, num(p_min)]
    if caps.spec_type_draft:
        argv += ["--spec-type", "draft-simple"]
    return argv


def server_argv(
    caps: Capabilities,
    target: Path | str,
    draft: Path | str | None,
    k: int | None,
    *,
    p_min: float | None = None,
    ctx_size: int = 4096,
    host: str = "127.0.0.1",
    port: int = 8080,
    threads: int | None = None,
    gpu_layers: int | None = None,
) -> list[str]:
    """``llama-server`` serving ``target``, speculating with ``draft`` at K when both are given."""
    argv = [str(caps.binary), "-m", str(target), "-c", str(ctx_size), "--host", host, "--port", str(port)]
    if threads:
        argv += ["-t", str(threads)]
    if gpu_layers is not None:
        argv += ["-ngl", str(gpu_layers)]
    if draft is not None and k:
        if caps.model_draft_flag is None:
            raise LlamaCppError(f"{caps.binary.name} accepts no draft-model option (-md)")
        argv += [caps.model_draft_flag, str(draft)]
        if gpu_layers is not None and caps.draft_gpu_layers_flag:
            argv += [caps.draft_gpu_layers_flag, str(gpu_layers)]
        argv += k_flags(caps, k, 0, p_min)
    return argv
