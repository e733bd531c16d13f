"""``pairedge doctor``: what this machine can run, and with ``--model`` what it can run from a model folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pairedge.cli.app import app, console, fail, handle_errors
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from pairedge.runtime.folder_check import FolderReport


@app.command()
@handle_errors
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the probe as JSON instead of a table."),
    model: Path | None = typer.Option(
        None,
        "--model",
        help="A model folder: which precisions and backends run here (files checked as the runtime checks "
        "them, one real inference each); exit code 1 when nothing in it runs or a file is broken.",
    ),
) -> None:
    """Report Python, numpy, OpenCV, ONNX Runtime (providers), torch, TensorRT, CUDA / GPU and nvcc."""
    from pairedge.probe import probe

    found = probe()
    report = None
    if model is not None:
        from pairedge.runtime.folder_check import inspect_model_folder

        report = inspect_model_folder(model)
    if as_json:
        data = found.as_dict() if report is None else {"machine": found.as_dict(), "model": report.as_dict()}
        console.print_json(json.dumps(data))
    else:
        table = Table(title="pairedge doctor", show_lines=False)
        table.add_column("component")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for check in found.checks:
            status = "[green]ok[/]" if check.ok else "[yellow]missing[/]"
            table.add_row(escape(check.name), status, escape(str(check.detail)))
        console.print(table)
        if report is not None:
            _print_folder(report)
    if report is not None and (not report.runnable or report.problems):
        raise fail(f"{report.folder}: {report.summary()}" + (f"; {len(report.problems)} broken file(s)"
                                                                 if report.problems else ""))  # fmt: skip


def _print_folder(report: FolderReport) -> None:
    """The model-folder part of the table output."""
    console.print(f"\n[bold]model folder[/] {escape(str(report.folder))}")
    console.print(f"  integrity: {escape(report.integrity)}")
    if report.model:
        console.print(f"  model: {escape(report.model)}")
    if report.flow:
        console.print(f"  optical flow: {escape(report.flow)}")
    table = Table(show_lines=False)
    table.add_column("precision")
    table.add_column("backend")
    table.add_column("runs here")
    table.add_column("why not", overflow="fold")
    for o in report.options:
        mark = "[green]yes[/]" if o.runs else "[yellow]no[/]"
        table.add_row(escape(o.precision), escape(o.backend), mark, escape(o.reason or ""))
    console.print(table)
    for problem in report.problems:
        console.print(f"  [red]broken:[/] {escape(problem)}")
    console.print(escape(report.summary()))
