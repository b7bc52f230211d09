"""Registering GGUF files on this machine's disk, named by their absolute path."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from inspector.hub_names import shard_names
from inspector.info import InspectError, inspect_source
from inspector.sources import SourceError
from registry.catalog.registration import Registered, find_unchanged, finish, register


class LocalFileError(Exception):
    """The file cannot be registered; the message is one line."""


def local_etag(path: str) -> tuple[str, int]:
    """Size and modification times stand in for a hash: hashing gigabytes to notice a change is too slow."""
    try:
        shards = shard_names(path)
    except SourceError as exc:  # a split into more shards than are ever read
        raise LocalFileError(str(exc)) from None
    try:
        stats = [os.stat(s) for s in shards]
    except FileNotFoundError as exc:
        raise LocalFileError(f"{exc.filename}: no such file") from None
    size = sum(st.st_size for st in stats)
    return "local:" + ",".join(f"{st.st_size}:{st.st_mtime_ns}" for st in stats)[:190], size


def register_local(path: str | os.PathLike, made_by: tuple[int, int] | None = None) -> Registered:
    """Register a file on this machine; ``made_by``: the (draft, target) file ids of the adapt job that wrote it."""
    p = Path(path).resolve()
    if p.is_dir():
        raise LocalFileError(f"{p}: is a directory, not a GGUF file")
    source = str(p)
    etag, size = local_etag(source)
    if (same := find_unchanged(source, etag, size)) is not None:
        return Registered(same, "unchanged")
    try:
        info = inspect_source(source, settings.SPECREG_MAX_HEADER_BYTES)
    except InspectError as exc:
        raise LocalFileError(str(exc)) from None
    reg = register(info, source=source, path=source, etag=etag, size=size, made_by=made_by)
    finish([reg.file.pk])
    return reg
