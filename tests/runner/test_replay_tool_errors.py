"""The replay tool's own reason reaches the user even when llama.cpp's log thread shares its stderr line."""

from __future__ import annotations

import sys

import pytest

from runner.predict.tool import ReplayError, run_tool


def stand_in(stderr: str, rc: int) -> list[str]:
    """A process that writes STDERR and exits RC, as the tool does when it refuses."""
    return [sys.executable, "-c", f"import sys; sys.stderr.write({stderr!r}); sys.exit({rc})"]


def test_the_tools_reason_is_found_after_a_log_prefix_on_its_line():
    # llama.cpp's log thread printed an entry's prefix, then the tool's line came before the entry's text.
    err = "llama_context: n_ctx = 512\nW specreg-replay: the transcript (8 tokens) ends before the run does\nmsg\n"
    with pytest.raises(ReplayError) as e:
        run_tool(stand_in(err, 3), timeout_s=30)
    assert str(e.value) == "specreg-replay: the transcript (8 tokens) ends before the run does"


def test_without_the_tools_reason_the_exit_is_described():
    with pytest.raises(ReplayError, match="^exited 3$"):
        run_tool(stand_in("llama_context: n_ctx = 512\n", 3), timeout_s=30)
