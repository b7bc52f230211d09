"""Registering a file named by a person: a local path or an hf:// source, the one way every caller uses."""

from __future__ import annotations

from inspector.sources import is_remote
from registry.catalog.local_files import LocalFileError, register_local
from registry.catalog.registration import Registered
from registry.hub.importing import HubImportError, import_source
from registry.models import GGUFFile


class SourceRegistrationError(Exception):
    """The source cannot be registered; one line."""


def register_source(spec: str) -> Registered:
    """Register ``spec`` (a path on this machine or hf://OWNER/REPO[@REVISION]/PATH) and compute its pairs."""
    spec = spec.strip()
    try:
        if spec.startswith("hf://"):
            return import_source(spec)
        if is_remote(spec):
            raise SourceRegistrationError(f"{spec}: name a Hub file as hf://OWNER/REPO[@REVISION]/PATH")
        return register_local(spec)
    except (HubImportError, LocalFileError) as exc:
        raise SourceRegistrationError(str(exc)) from None


def resolve_file(spec: str) -> GGUFFile:
    """A registered file by id, or a source (path or hf://…) as check_pair takes, registered now if it is new.

    The command line's one way to name a file (deployments, SPEED-Bench imports); raises
    SourceRegistrationError with one line."""
    spec = spec.strip()
    if spec.isdigit():
        f = GGUFFile.objects.filter(pk=int(spec)).first()
        if f is None:
            raise SourceRegistrationError(f"no registered file with id {spec}")
        return f
    existing = GGUFFile.objects.filter(source=spec).first()
    return existing if existing is not None else register_source(spec).file
