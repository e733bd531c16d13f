"""The summary of a run as the CLI prints it (``pairedge run``, a ROS 2 log, ``pairedge demo``): a progress
bar over frames, two narrow tables, the drops and notes, the files, and exit 1 when nothing was scored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pairedge.apps.cli.app import console, fail
from pairedge.apps.cli.progress import stage_progress
from pairedge.core.io.textio import printable
from pairedge.runtime.runner.run import RunSummary
from rich.markup import escape

if TYPE_CHECKING:
    from rich.console import RenderableType


@contextmanager
def frame_progress(description: str, total: int | None) -> Iterator[Callable[[object], None]]:
    """:func:`pairedge.apps.cli.progress.stage_progress` over frames (it starts with the first frame, so a
    model that fails to load prints only its error line). Yields ``advance(result)`` for ``on_frame``
    callbacks."""

    with stage_progress(description, total=total) as advance:
        yield lambda _=None: advance(1)


def print_summary(summary: RunSummary, title: str) -> None:
    """The summary table, the drops and notes, and the files written."""
    console.print(summary_table(summary, title))
    print_notes(summary)
    files = ", ".join(printable(f, 1000) for f in summary.files.values())
    console.print("files: " + escape(files), highlight=False, soft_wrap=True)


def check_scored(summary: RunSummary) -> None:
    """Exit 1 (one error line) when the run scored no frame at all: every frame dropped, or none read.

    Raises:
        typer.Exit: code 1, after the message.
    """
    why = summary.unscored()
    if why is not None:
        raise fail(printable(why, 1000))


#: The widest row name of the summary tables (longer label names are cut): the tables fit 80 columns.
ROW_NAME = 30


def _name(text: str, width: int = ROW_NAME) -> str:
    """A row name or title: control characters escaped, at most ``width`` characters, Rich markup escaped."""
    text = printable(text)
    return escape(text if len(text) <= width else text[: width - 3] + "...")


def summary_table(summary: RunSummary, title: str) -> RenderableType:
    """The run summary as two narrow Rich tables (one value per cell; the details stay in summary.json):
    counts (frames, frames scored and with flow, people, pairs, interactions per label, groups, FPS, drops)
    and per-stage latency (p50 and p99 ms). Fits an 80-column terminal.

    ``title`` and the label names are plain text (escaped here).
    """
    from rich.console import Group
    from rich.table import Table

    table = Table(title=_name(title, 76), show_header=False)
    table.add_column("what", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_row("frames", str(summary.frames))
    table.add_row("frames scored", str(summary.frames_scored))
    if summary.flow_frames is not None:
        table.add_row("frames with flow", str(summary.flow_frames))
    table.add_row("people per frame", f"{summary.people_per_frame:.1f}")
    table.add_row("tracks", str(summary.tracks))
    table.add_row("pairs scored (pair-frames)", str(summary.pairs))
    table.add_row("interacting pair-frames", str(summary.interacting))
    for label, count in summary.interactions.items():
        table.add_row("  " + _name(str(label)), str(count))
    table.add_row("group-frames", str(summary.groups))
    table.add_row("FPS, pipeline", f"{summary.fps:.0f}")
    table.add_row("FPS, end to end", f"{summary.wall_fps:.0f}")
    table.add_row("dropped frames", str(sum(summary.frames_dropped.values())))
    table.add_row("dropped detections", str(sum(summary.detections_dropped.values())))
    latency = Table(title="latency per frame (ms)")
    latency.add_column("stage", no_wrap=True)
    latency.add_column("p50", justify="right", no_wrap=True)
    latency.add_column("p99", justify="right", no_wrap=True)
    for stage, values in summary.latency_ms.items():
        if stage == "total" or values["p99"] >= 0.005:
            latency.add_row(
                "step total" if stage == "total" else escape(stage),
                f"{values['p50']:.2f}",
                f"{values['p99']:.2f}",
            )
    return Group(table, latency)


def print_notes(summary: RunSummary) -> None:
    """Drop reasons and notes, one line each (names from files and logs escaped); a warning first when the
    run scored nothing or its optical flow never ran."""
    if summary.frames and not summary.frames_scored:
        console.print("[red]warning:[/] no frame was scored (every frame was dropped)", highlight=False)
    for reason, count in {**summary.frames_dropped, **summary.detections_dropped}.items():
        console.print(
            f"[yellow]dropped[/] {count} x {escape(printable(str(reason), 1000))}",
            highlight=False,
            soft_wrap=True,
        )
    for note in summary.notes:
        style = "[yellow]note:[/]" if note.startswith("WARNING") else "[dim]note:[/]"
        console.print(f"{style} {escape(printable(str(note), 1000))}", highlight=False, soft_wrap=True)
