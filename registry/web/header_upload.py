"""Inspecting a header sent from the browser: the first bytes of a local file, never the whole file.

The page reads the header with ``File.slice`` and posts it. The reader sees only the bytes sent:
when they end before the header does, it stops there (nothing stands in for the missing bytes, so
counts and lengths in the sent bytes cannot make it walk or allocate more than was sent), and the
answer says how many bytes are needed at least: where the reader stopped, plus the fewest bytes the
items it has not reached can take (``GGUFTruncated.need``), a lower bound of the header's end.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from inspector.gguf_header import GGUFError, GGUFTruncated, read_header
from inspector.info import ModelInfo, info_from_headers
from inspector.sources import SourceError
from registry.access.policy import header_cap

# Browser uploads are held in memory: the cap is lower than for server-side reads.
UPLOAD_CAP = min(settings.SPECREG_MAX_HEADER_BYTES, 64 * 1024 * 1024)
FIRST_SLICE = 256 * 1024


def upload_cap(user) -> int:
    """The most header bytes ``user`` may send: the public cap (registry.access.policy.header_cap) for visitors
    without the server-token permission, so anonymous uploads cost no more than anonymous Hub reads."""
    return min(UPLOAD_CAP, header_cap(user))


class HeaderError(Exception):
    """Not a readable GGUF header; one line."""


@dataclass
class NeedMore(Exception):
    need: int


class PrefixSource:
    """The sent prefix of a file of ``total`` bytes: reads end where the sent bytes end."""

    size: int | None  # as in inspector.sources.Source (always known here)

    def __init__(self, name: str, data: bytes, total: int) -> None:
        self.name, self.data, self.size = name, data, total
        self.bytes_fetched = 0

    def read_at(self, offset: int, n: int) -> bytes:
        chunk = self.data[offset : offset + n]
        self.bytes_fetched += len(chunk)
        return chunk

    def close(self) -> None:
        pass


def inspect_prefix(name: str, data: bytes, total: int, cap: int = UPLOAD_CAP) -> ModelInfo:
    """The inspector's view of the file whose first ``len(data)`` of ``total`` bytes were sent; its header
    may take at most ``cap`` bytes (upload_cap of the sender)."""
    if total < len(data):
        raise HeaderError(f"{name}: sent {len(data):,} bytes of a file said to hold {total:,}")
    src = PrefixSource(name, data, total)
    try:
        header = read_header(src, cap)
    except GGUFTruncated as exc:
        if len(data) < total and exc.need <= total:  # the file has those bytes: ask for them
            if exc.need > cap:
                raise HeaderError(
                    f"{name}: the header needs at least {exc.need:,} bytes, "
                    f"above the {cap:,}-byte cap for browser uploads"
                ) from None
            raise NeedMore(max(exc.need, len(data) + 1)) from None
        raise HeaderError(f"{name}: {exc}") from None
    except (GGUFError, SourceError) as exc:
        raise HeaderError(f"{name}: {exc}") from None
    if header.header_size > len(data):
        if header.header_size > cap:
            raise HeaderError(
                f"{name}: the header needs at least {header.header_size:,} bytes, "
                f"above the {cap:,}-byte cap for browser uploads"
            )
        raise NeedMore(header.header_size)
    info = info_from_headers([header])
    info.source = name
    return info
