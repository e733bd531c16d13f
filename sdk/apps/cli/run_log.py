"""``pairedge run LOG``: a ROS 2 log through the runtime, or ``--list-topics`` (the log half of ``run``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pairedge.apps.cli.app import console, fail
from pairedge.apps.cli.summary import check_scored, frame_progress, print_summary
from pairedge.apps.ros.bag import list_topics, run_log
from pairedge.core.io.textio import printable
from rich.markup import escape

if TYPE_CHECKING:
    from pairedge.apps.ros.bag import LogTopics
    from pairedge.runtime.runner.run import RunOptions


def run_log_command(
    source: Path, options: RunOptions, topics: LogTopics, out: Path, out_bag: Path | None, list_only: bool
) -> None:
    """``pairedge run LOG``: a ROS 2 log through the runtime (or ``--list-topics``).

    Every name that comes from the log (topics, types) is echoed through
    :func:`~pairedge.core.io.textio.printable` and Rich escaping, so it cannot start a line of its own.
    """
    from rich.table import Table

    name = printable(source.name)
    if list_only:
        table = Table(title=escape(f"topics of {name}"))
        for column in ("topic", "type", "messages"):
            table.add_column(column)
        for topic in list_topics(source):
            table.add_row(escape(printable(topic.name)), escape(printable(topic.msgtype)), str(topic.count))
        console.print(table)
        return
    with frame_progress(f"running {name}", options.max_frames) as advance:
        summary = run_log(source, out, options, topics, out_bag, on_frame=advance)
    print_summary(summary, f"pairedge run {name}")
    if summary.frames == 0:
        raise fail(
            f"{printable(source)}: no image was paired with detections; see the drops above "
            "(wrong topics, or stamps further apart than --stamp-tolerance?)"
        )
    check_scored(summary)
