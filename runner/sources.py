"""Register a file named on the command line or a form (local path or hf:// source) before benchmarking it."""
from __future__ import annotations

from inspector.sources import is_remote
from registry.hub_import import HubImportError, import_source
from registry.local_files import LocalFileError, register_local
from registry.models import GGUFFile


class SourceRegistrationError(Exception):
    """The source cannot be registered; one line."""


def register_source(spec: str) -> GGUFFile:
    try:
        if is_remote(spec):
            return GGUFFile.objects.get(pk=import_source(spec).file_id)
        return register_local(spec).file
    except (HubImportError, LocalFileError) as exc:
        raise SourceRegistrationError(str(exc)) from None
