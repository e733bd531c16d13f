"""``pairedge check``: static TensorRT readiness of an ONNX model (no GPU, no TensorRT, no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from pairedge.cli.app import app, console, handle_errors
from rich.markup import escape
from rich.table import Table


def print_report(report: Any) -> None:
    """The findings of a :class:`~pairedge.export.tensorrt.check.CheckReport` as a table (or one ok line)."""
    title = f"{report.path.name} for {report.target}"
    if not report.findings:
        console.print(f"[green]ok[/] {escape(title)}: no TensorRT readiness problems found", highlight=False)
        return
    table = Table(title=escape(title))
    for column in ("severity", "rule", "where", "problem"):
        table.add_column(column, overflow="fold")
    for f in report.findings:
        colour = "red" if f.severity == "error" else "yellow"
        table.add_row(f"[{colour}]{f.severity}[/]", escape(f.rule), escape(f.where), escape(f.message))
    console.print(table)


def run_checks(models: list[Path], target: str) -> bool:
    """Check each file, print its report; True when none has an error."""
    from pairedge.export.tensorrt.check import check_model

    ok = True
    for model in models:
        report = check_model(model, target)
        print_report(report)
        ok = ok and report.ok
    return ok


@app.command("check")
@handle_errors
def check_command(
    models: list[Path] = typer.Argument(
        ..., help="ONNX file(s), or a model folder (checks every stage*.onnx)."
    ),
    target: str = typer.Option(
        "tensorrt-10.3", "--target", help="tensorrt-10.3 (JetPack 6), tensorrt-10.13 or tensorrt-11."
    ),
) -> None:
    """Lint ONNX models for a TensorRT target: ops, opset, dtypes, dynamic axes, Q/DQ rules, fp16 range."""
    from pairedge.errors import InputError

    files: list[Path] = []
    for path in models:
        found = sorted(path.glob("stage*.onnx")) if path.is_dir() else [path]
        if not found:  # an empty folder is not "no problems found"
            raise InputError(
                f"{path}: no stage*.onnx files in this folder; expected a model folder (stage1.onnx, "
                "stage2.onnx from `pairedge export`) or ONNX file paths"
            )
        files += found
    if not run_checks(files, target):
        raise typer.Exit(code=1)
