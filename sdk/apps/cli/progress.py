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
from contextlib import ExitStack, contextmanager

from pairedge.apps.cli.app import console
from rich.console import Console
from rich.markup import escape


@contextmanager
def stage_progress(
    description: str, total: int | None = None, *, unit: str = "frames", out: Console | None = None
) -> Iterator[Callable[[int], None]]:
    """A callable ``advance(n=1)`` for one stage of work, shown as a bar or as start / end lines.

    The display starts with the first step, so a stage that fails before it (a model that does not load)
    prints only its error line; a stage that raises prints no end line.

    Args:
        description: plain text naming the stage (escaped here).
        total: the number of steps when known (None: a count without a bar end).
        unit: what a step is, for the end line when piped ("frames", "sources").
        out: the console (default: the CLI's stdout console).
    """
    out = out or console
    live = out.is_terminal and not out.is_dumb_terminal
    done, start = [0], [0.0]
    with ExitStack() as stack:
        bar: list[Callable[[int], None]] = []
        started = [False]

        def begin() -> None:
            started[0], start[0] = True, time.perf_counter()
            if live:
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )

                columns = (
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                )
                progress = stack.enter_context(Progress(*columns, console=out, transient=True))
                task = progress.add_task(escape(description), total=total)
                bar.append(lambda n: progress.advance(task, n))
            else:
                out.print(f"{escape(description)} ...", highlight=False, soft_wrap=True)

        def advance(n: int = 1) -> None:
            if not started[0]:
                begin()
            done[0] += n
            if bar:
                bar[0](n)

        yield advance
        if not live:
            if not started[0]:
                begin()
            seconds = time.perf_counter() - start[0]
            of = f" of {total}" if total is not None else ""
            out.print(
                f"{escape(description)}: {done[0]}{of} {unit} in {seconds:.1f} s",
                highlight=False,
                soft_wrap=True,
            )
