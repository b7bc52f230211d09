"""Work budgets for the tests of cost attacks: what a protection promises, counted rather than timed.

A wall-clock bound of a second breaks on a loaded 2-core machine; the number of Python lines a call runs
does not change with the load. A Python step per token (or per element, per byte, per loop turn of a
hostile count) shows as millions of lines, vectorised or refused work as a few thousand.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any


class OverBudget(BaseException):  # noqa: N818 - a BaseException: no ``except Exception`` of the code under test eats it
    """Raised inside the traced code once it runs past its budget: a runaway loop fails at once, not in minutes."""


@dataclass
class Lines:
    limit: int
    count: int = 0

    def __str__(self) -> str:
        return f"{self.count:,} Python lines run (budget {self.limit:,})"


@contextmanager
def python_lines(limit: int) -> Iterator[Lines]:
    """Count the Python lines this thread runs inside (every module: the code under test, Django, numpy's
    Python layer). Past ``limit``, ``OverBudget`` is raised where the code stands; assert ``lines.count <=
    lines.limit`` after the block as well, in case the code caught it."""
    lines = Lines(limit)

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            lines.count += 1
            if lines.count > limit:
                raise OverBudget(str(lines))
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local

    previous = sys.gettrace()
    thread = threading.current_thread()
    sys.settrace(calls)
    try:
        yield lines
    finally:
        if threading.current_thread() is thread:
            sys.settrace(previous)
