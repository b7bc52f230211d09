"""Errors of reading a source, shared by local and remote reads (the lowest module: it imports nothing)."""

from __future__ import annotations


class SourceError(Exception):
    """A source could not be opened or read; the message is one line naming source and problem."""


class Unreachable(SourceError):
    """The server could not be reached at all (no connection, no answer in time, offline mode).

    A type of its own so that callers (an import of ten repositories) can stop asking the same
    dead server without matching words in the message.
    """


class DeadlineExceeded(Unreachable):
    """The remote reads of one request or job ran past SPECREG_HEADER_DEADLINE_SECONDS, or past the end of the
    job they are part of (``deadlines.job_deadline``); a web check answers it with 504."""
