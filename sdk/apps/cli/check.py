"""``pairedge check``: static TensorRT readiness of an ONNX model (no GPU, no TensorRT, no torch).

The output is one table (file, target, result, first problem) that fits in 80 columns, and below it every
finding on its own line (severity, rule, where, what to do). Exit code 1 when any file has an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from pairedge.apps.cli.app import app, console, handle_errors
from pairedge.core import limits
from pairedge.core.bundled import BUNDLED_NAME, resolve_model_dir
from pairedge.core.errors import InputError
from pairedge.core.io.textio import printable
from rich.markup import escape
from rich.table import Table


def _result(report: Any) -> str:
    """``ok`` or the counts: ``2 errors, 1 warning``."""
    errors = len(report.errors)
    counts = ((errors, "error"), (len(report.findings) - errors, "warning"))
    return ", ".join(f"{n} {word}{'s' if n > 1 else ''}" for n, word in counts if n) or "ok"


def _colour(report: Any) -> str:
    return "red" if report.errors else "yellow" if report.findings else "green"


def _names(reports: Sequence[Any]) -> list[str]:
    """The file column: base names when they are unique, else the paths as given."""
    names = [r.path.name for r in reports]
    return names if len(set(names)) == len(names) else [str(r.path) for r in reports]


def print_reports(reports: Sequence[Any]) -> None:
    """The :class:`~pairedge.export.tensorrt.check.CheckReport` of every file: the table, then the details."""
    table = Table(title="pairedge check: TensorRT readiness")
    # the target and the result never shrink; a long file name or first problem is cut (details below)
    table.add_column("file", no_wrap=True, overflow="ellipsis", max_width=28)
    table.add_column("target", no_wrap=True, min_width=max(len(r.target) for r in reports))
    table.add_column("result", no_wrap=True, min_width=max(len(_result(r)) for r in reports))
    table.add_column("first problem", no_wrap=True, overflow="ellipsis", max_width=30)
    for name, report in zip(_names(reports), reports, strict=True):
        first = report.errors[0] if report.errors else (report.findings[0] if report.findings else None)
        shown = f"{first.rule}: {first.where}" if first else "-"
        result = f"[{_colour(report)}]{_result(report)}[/]"
        table.add_row(escape(printable(name)), escape(report.target), result, escape(printable(shown)))
    console.print(table)
    for name, report in zip(_names(reports), reports, strict=True):
        for f in report.findings:
            colour = "red" if f.severity == "error" else "yellow"
            console.print(
                f"{escape(printable(name))}: [{colour}]{f.severity}[/] {escape(f.rule)} at "
                f"{escape(printable(f.where))}: {escape(printable(f.message, 1000))}",
                highlight=False,
            )
    if not any(r.findings for r in reports):
        console.print("no TensorRT readiness problems found", highlight=False)


def print_report(report: Any) -> None:
    """One file's report (the table of :func:`print_reports` with one row)."""
    print_reports([report])


def run_checks(models: list[Path], target: str) -> bool:
    """Check every file (each refused first if it is not a regular ONNX file), print the reports; True when
    none has an error."""
    from pairedge.export.tensorrt.check import check_model

    for model in models:  # before any work: a FIFO or /dev/zero is one line, in milliseconds
        limits.regular_file(model, "an ONNX model (.onnx)", limits.MAX_MODEL_BYTES)
    reports = [check_model(model, target) for model in models]
    print_reports(reports)
    return all(r.ok for r in reports)


@app.command("check")
@handle_errors
def check_command(
    models: list[Path] = typer.Argument(
        ..., help="ONNX file(s), or a model folder (checks every stage*.onnx); 'default' = the bundled model."
    ),
    target: str = typer.Option(
        "tensorrt-10.3", "--target", help="tensorrt-10.3 (JetPack 6), tensorrt-10.13 or tensorrt-11."
    ),
) -> None:
    """Lint ONNX models for a TensorRT target: onnx.checker, ops, opset, dtypes, dynamic axes, Q/DQ rules,
    fp16 range. A table, exit code 1 on errors."""
    from pairedge.export.tensorrt.onnx_ops import TARGETS

    if target not in TARGETS:  # before reading any file
        raise InputError(f"--target: expected one of {', '.join(TARGETS)}, got {target!r}")

    files: list[Path] = []
    for given in models:
        path = resolve_model_dir(given) if str(given) == BUNDLED_NAME else given
        found = sorted(path.glob("stage*.onnx")) if path.is_dir() else [path]
        if not found:  # an empty folder is not "no problems found"
            raise InputError(
                f"{path}: no stage*.onnx files in this folder; expected a model folder (stage1.onnx, "
                "stage2.onnx from `pairedge export`) or ONNX file paths"
            )
        files += found
    if not run_checks(files, target):
        raise typer.Exit(code=1)
