"""``pairedge run LOG``: a ROS 2 log through the runtime, or ``--list-topics`` (the log half of ``run``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pairedge.cli.app import console, fail
from pairedge.cli.run import print_notes, summary_table
from rich.markup import escape

if TYPE_CHECKING:
    from pairedge.ros.bag import LogTopics
    from pairedge.runtime.run import RunOptions


def run_log_command(source: Path, options: RunOptions, topics: LogTopics, out: Path, out_bag: Path | None,
             list_only: bool) -> None:  # fmt: skip
    """``pairedge run LOG``: a ROS 2 log through the runtime (or ``--list-topics``)."""
    from pairedge.ros.bag import list_topics, run_log
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    if list_only:
        table = Table(title=escape(f"topics of {source.name}"))
        for column in ("topic", "type", "messages"):
            table.add_column(column)
        for topic in list_topics(source):
            table.add_row(escape(topic.name), escape(topic.msgtype), str(topic.count))
        console.print(table)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(f"running {escape(source.name)}", total=options.max_frames)
        summary = run_log(source, out, options, topics, out_bag, on_frame=lambda _: progress.advance(task))
    console.print(summary_table(summary, f"pairedge run {source.name}"))
    print_notes(summary)
    console.print("files: " + escape(", ".join(summary.files.values())), highlight=False, soft_wrap=True)
    if summary.frames == 0:
        raise fail(f"{source}: no image was paired with detections; see the drops above "
                   "(wrong topics, or stamps further apart than --stamp-tolerance?)")  # fmt: skip
