"""Progress for long commands: a live bar on a terminal, one plain line per stage when piped.

Rich's live display redraws in place with control sequences; written into a file or a pipe that leaves
residue (half-drawn bars, carriage returns) in the log a user or CI keeps. :func:`stage_progress` draws the
bar only on an interactive terminal and otherwise prints one line when a stage starts and one when it ends.

>>> with stage_progress("running clip.mp4", total=300) as advance:
...     for frame in frames:
...         advance()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pairedge.cli.app import console
from rich.console import Console
from rich.markup import escape


@contextmanager
def stage_progress(
    description: str, total: int | None = None, *, unit: str = "frames", out: Console | None = None
) -> Iterator[Callable[[int], None]]:
    """A callable ``advance(n=1)`` for one stage of work, shown as a bar or as start / end lines.

    Args:
        description: plain text naming the stage (escaped here).
        total: the number of steps when known (None: a count without a bar end).
        unit: what a step is, for the end line when piped ("frames", "sources").
        out: the console (default: the CLI's stdout console).
    """
    out = out or console
    done = [0]

    def count(n: int = 1) -> None:
        done[0] += n

    if out.is_terminal and not out.is_dumb_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=out, transient=True) as progress:
            task = progress.add_task(escape(description), total=total)

            def advance(n: int = 1) -> None:
                count(n)
                progress.advance(task, n)

            yield advance
        return
    start = time.perf_counter()
    of = f" of {total}" if total is not None else ""
    out.print(f"{escape(description)} ...", highlight=False, soft_wrap=True)
    try:
        yield count
    finally:
        seconds = time.perf_counter() - start
        out.print(
            f"{escape(description)}: {done[0]}{of} {unit} in {seconds:.1f} s", highlight=False, soft_wrap=True
        )
