"""``pairedge doctor``: what this machine can run."""

from __future__ import annotations

import json

import typer
from pairedge.cli.app import app, console, handle_errors
from rich.markup import escape
from rich.table import Table


@app.command()
@handle_errors
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the probe as JSON instead of a table."),
) -> None:
    """Report Python, numpy, OpenCV, ONNX Runtime (providers), torch, TensorRT, CUDA / GPU and nvcc."""
    from pairedge.probe import probe

    found = probe()
    if as_json:
        console.print_json(json.dumps(found.as_dict()))
        return
    table = Table(title="pairedge doctor", show_lines=False)
    table.add_column("component")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for check in found.checks:
        status = "[green]ok[/]" if check.ok else "[yellow]missing[/]"
        table.add_row(escape(check.name), status, escape(str(check.detail)))
    console.print(table)
