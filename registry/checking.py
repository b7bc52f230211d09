"""Checking two sources named on the web: registered files from the database, hf:// files remotely."""
from __future__ import annotations

from django.conf import settings

from inspector.compat import PairCheck, check_pair
from inspector.info import InspectError, ModelInfo, inspect_source

from .models import GGUFFile
from .registration import load_info


class CheckError(Exception):
    """A source cannot be read; one line."""


def info_for(source: str) -> ModelInfo:
    source = source.strip()
    if not source:
        raise CheckError("name two files: a registered source or hf://OWNER/REPO[@REVISION]/PATH")
    f = GGUFFile.objects.select_related("token_table").filter(source=source).first()
    if f is not None:
        return load_info(f)
    if not source.startswith("hf://"):
        # The server never opens paths or URLs given on a web form: that would read its own disk or network.
        raise CheckError(f"{source}: not a registered file; the web form reads registered files and "
                         "hf://OWNER/REPO[@REVISION]/PATH files (for a file on your computer, use “Local file”)")
    try:
        return inspect_source(source, settings.SPECREG_MAX_HEADER_BYTES)
    except InspectError as exc:
        raise CheckError(str(exc)) from None


def check_sources(target: str, draft: str) -> tuple[PairCheck, ModelInfo, ModelInfo]:
    t, d = info_for(target), info_for(draft)
    return check_pair(t, d), t, d
