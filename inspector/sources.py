"""Byte sources a GGUF header can be read from: local files, file objects, and (remote.py) HTTP.

Every reader in specreg goes through ``Source.read_at`` so that a remote file is read by Range
requests of exactly the bytes the parser asks for, and ``bytes_fetched`` can be reported.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

# Re-exported: callers name the errors of reading a source where they open one.
from .errors import DeadlineExceeded as DeadlineExceeded
from .errors import SourceError as SourceError
from .errors import Unreachable as Unreachable

if TYPE_CHECKING:
    from .deadlines import Deadline  # deadlines import huggingface_hub: local reads must not


class Source(Protocol):
    name: str  # how the user named it: a path or an hf:// URL
    size: int | None  # total bytes, when known
    bytes_fetched: int

    def read_at(self, offset: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``offset``; fewer only at the end of the file."""
        ...

    def close(self) -> None: ...


class FileSource:
    """A local path or any seekable binary file object."""

    def __init__(self, fileobj: BinaryIO, name: str, owns: bool = False) -> None:
        self._f = fileobj
        self.name = name
        self._owns = owns
        self.bytes_fetched = 0
        try:
            self.size: int | None = os.fstat(fileobj.fileno()).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            try:
                pos = fileobj.tell()
                self.size = fileobj.seek(0, io.SEEK_END)
                fileobj.seek(pos)
            except (OSError, io.UnsupportedOperation) as exc:
                raise SourceError(f"{name}: not a seekable file ({exc})") from None

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> FileSource:
        p = Path(path)
        try:
            # Checked before opening: opening a FIFO blocks until a writer appears, and reading a
            # character device (/dev/zero, a terminal) never ends.
            mode = os.stat(p).st_mode
            if stat.S_ISDIR(mode):
                raise SourceError(f"{p}: is a directory, not a GGUF file")
            if not _is_file(mode):
                raise SourceError(f"{p}: is {_kind(mode)}, not a regular file")
            # O_NONBLOCK: should the path be swapped for a FIFO after the check, open still returns at once.
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            if not _is_file(os.fstat(fd).st_mode):
                os.close(fd)
                raise SourceError(f"{p}: is no longer a regular file")
            os.set_blocking(fd, True)
            return cls(os.fdopen(fd, "rb"), str(path), owns=True)
        except FileNotFoundError:
            raise SourceError(f"{p}: no such file") from None
        except PermissionError:
            raise SourceError(f"{p}: permission denied") from None
        except OSError as exc:
            raise SourceError(f"{p}: cannot open ({exc.strerror or exc})") from None

    def read_at(self, offset: int, n: int) -> bytes:
        try:
            self._f.seek(offset)
            data = self._f.read(n)
        except OSError as exc:
            raise SourceError(f"{self.name}: read failed ({exc.strerror or exc})") from None
        self.bytes_fetched += len(data)
        return data

    def close(self) -> None:
        if self._owns:
            self._f.close()

    def __enter__(self) -> FileSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _is_file(mode: int) -> bool:
    """A regular file or a block device (a disk image): both have a size and can be read at any offset."""
    return stat.S_ISREG(mode) or stat.S_ISBLK(mode)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "something else"


def is_remote(spec: str) -> bool:
    return spec.startswith(("hf://", "http://", "https://"))


def open_source(spec: str | os.PathLike[str] | BinaryIO, *, deadline: Deadline | None = None) -> Source:
    """Open a path, a file object, an ``http(s)://`` URL or an ``hf://OWNER/REPO[@REV]/PATH``.

    ``deadline``: shared by several remote reads (the shards of one file); a remote read gets its own
    otherwise. Local files have none."""
    if isinstance(spec, (str, os.PathLike)):
        s = os.fspath(spec)
        if is_remote(s):
            from .remote import open_remote  # only here: a local read never loads huggingface_hub

            return open_remote(s, deadline=deadline)
        return FileSource.open(s)
    name = getattr(spec, "name", None)
    return FileSource(spec, name if isinstance(name, str) else "<file object>")
