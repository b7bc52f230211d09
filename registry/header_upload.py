"""Inspecting a header sent from the browser: the first bytes of a local file, never the whole file.

The page reads the header with ``File.slice`` and posts it. When the bytes end before the header
does, the answer says how many bytes are needed at least: the parse is repeated with zeros in
place of the missing bytes, and since zeros make every length, count and type as small as it can
be, the header end it finds is a lower bound of the real one.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from inspector.gguf_header import GGUFError, read_header
from inspector.info import ModelInfo, info_from_headers
from inspector.sources import SourceError

# Browser uploads are held in memory: the cap is lower than for server-side reads.
UPLOAD_CAP = min(settings.SPECREG_MAX_HEADER_BYTES, 64 * 1024 * 1024)
FIRST_SLICE = 256 * 1024


class HeaderError(Exception):
    """Not a readable GGUF header; one line."""


@dataclass
class NeedMore(Exception):
    need: int


class PaddedSource:
    """The sent prefix of a file of ``total`` bytes, read as if the rest were zeros."""

    def __init__(self, name: str, data: bytes, total: int) -> None:
        self.name, self.data, self.size = name, data, total
        self.bytes_fetched = 0
        self.padded = False

    def read_at(self, offset: int, n: int) -> bytes:
        end = min(offset + n, self.size)
        chunk = self.data[offset:end]
        if len(chunk) < end - offset:
            self.padded = True
            chunk += bytes(end - offset - len(chunk))
        self.bytes_fetched += len(chunk)
        return chunk

    def close(self) -> None:
        pass


def inspect_prefix(name: str, data: bytes, total: int) -> ModelInfo:
    """The inspector's view of the file whose first ``len(data)`` of ``total`` bytes were sent."""
    if total < len(data):
        raise HeaderError(f"{name}: sent {len(data):,} bytes of a file said to hold {total:,}")
    src = PaddedSource(name, data, total)
    try:
        header = read_header(src, UPLOAD_CAP)
    except (GGUFError, SourceError) as exc:
        if src.padded and len(data) < total:
            # A failure inside the zeros says nothing about the file; ask for more of it.
            raise NeedMore(min(total, max(2 * len(data), FIRST_SLICE))) from None
        raise HeaderError(f"{name}: {exc}") from None
    if header.header_size > len(data):
        if header.header_size > UPLOAD_CAP:
            raise HeaderError(f"{name}: the header needs at least {header.header_size:,} bytes, "
                              f"above the {UPLOAD_CAP:,}-byte cap for browser uploads")
        raise NeedMore(header.header_size)
    info = info_from_headers([header])
    info.source = name
    return info
