"""Progress when piped: one start line and one end line per stage, no control sequences."""

from __future__ import annotations

import io

from pairedge.apps.cli.progress import stage_progress
from rich.console import Console


def test_piped_progress_is_two_plain_lines() -> None:
    buffer = io.StringIO()
    out = Console(file=buffer, force_terminal=False, width=80)
    with stage_progress("running [clip].mp4", total=3, out=out) as advance:
        for _ in range(3):
            advance()
    text = buffer.getvalue()
    assert "\x1b" not in text and "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "running [clip].mp4 ..."
    assert lines[1].startswith("running [clip].mp4: 3 of 3 frames in ") and len(lines) == 2


def test_terminal_progress_counts_too() -> None:
    buffer = io.StringIO()
    out = Console(file=buffer, force_terminal=True, width=80)
    with stage_progress("sources", total=2, unit="sources", out=out) as advance:
        advance(2)
    assert buffer.getvalue()  # a live bar was drawn (transient)


def test_a_stage_that_fails_before_its_first_step_prints_nothing() -> None:
    import pytest

    buffer = io.StringIO()
    out = Console(file=buffer, force_terminal=False, width=80)
    with pytest.raises(RuntimeError), stage_progress("running clip.mp4", total=3, out=out):
        raise RuntimeError("model did not load")
    assert buffer.getvalue() == ""


def test_a_stage_that_fails_midway_prints_no_end_line() -> None:
    import pytest

    buffer = io.StringIO()
    out = Console(file=buffer, force_terminal=False, width=80)
    with pytest.raises(RuntimeError), stage_progress("running", total=3, out=out) as advance:
        advance()
        raise RuntimeError("boom")
    assert buffer.getvalue().splitlines() == ["running ..."]
