"""``pairedge doctor``: what this machine can run, and with ``--model`` what it can run from a model
folder."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from pairedge.apps.cli.app import app, console, fail, handle_errors
from pairedge.apps.cli.settings import Chosen, with_settings
from pairedge.apps.folder_check import inspect_model_folder
from pairedge.apps.probe import probe
from pairedge.core.bundled import describe_model, resolve_model_dir
from pairedge.core.io.textio import printable
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from pairedge.apps.folder_check import FolderReport
    from pairedge.apps.probe import Probe


@app.command()
@handle_errors
@with_settings(
    "model",
    defaults={"model": None},
    notes={
        "model": "pairedge doctor: which precisions and backends run here (files checked as the runtime "
        "checks them, realistic batches of 1, 64 and 512 pairs on each); exit code 1 when nothing in it runs "
        "or a file is broken. Default: the machine only."
    },
)
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the probe as JSON instead of a table."),
    *,
    settings: Chosen,
) -> None:
    """Report Python, numpy, OpenCV, ONNX Runtime (providers), torch, TensorRT, CUDA / GPU, the emulated CUDA
    device (HIP-CPU) and nvcc; on a Jetson the L4T / JetPack version, power mode and clocks; where OpenCV and
    numpy come from (a pip build shadowing JetPack's is flagged); rosbags and ray."""

    model = settings["model"]
    found = probe()
    report = None
    if model is not None:
        report = inspect_model_folder(resolve_model_dir(str(model)))
    if as_json:
        data = found.as_dict() if report is None else {"machine": found.as_dict(), "model": report.as_dict()}
        console.print_json(json.dumps(data))
    else:
        _print_probe(found)
        if report is not None:
            _print_folder(report)
    if report is not None and (not report.runnable or report.problems):
        raise fail(
            f"{report.folder}: {report.summary()}"
            + (f"; {len(report.problems)} broken file(s)" if report.problems else "")
        )


class _Notes:
    """Long texts kept out of table cells (80 columns, one value per cell): a cell shows ``see [n]`` and the
    text is printed below the table as ``[n] text``; equal texts share a number."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def ref(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def cell(self, text: str, width: int) -> str:
        """``text`` escaped when it fits in ``width`` characters, else a reference to a note."""
        return escape(text) if len(text) <= width else f"see {self.ref(text)}"

    def print(self) -> None:
        for k, text in enumerate(self.texts, start=1):
            console.print(f"  [{k}] {escape(text)}", highlight=False)


def _print_probe(found: Probe) -> None:
    """The machine's components: name, ok / missing, the version (long details as notes below)."""
    notes = _Notes()
    table = Table(title="pairedge doctor", show_lines=False)
    table.add_column("component", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", no_wrap=True, overflow="ellipsis")
    for check in found.checks:
        status = "[green]ok[/]" if check.ok else "[yellow]missing[/]"
        table.add_row(escape(check.name), status, notes.cell(printable(check.detail), 44))
    console.print(table)
    notes.print()


def _print_folder(report: FolderReport) -> None:
    """The model-folder part of the table output: facts as lines, options as a narrow table, reasons below."""

    console.print(
        f"\n[bold]model folder[/] {escape(printable(describe_model(report.folder), 1000))}", highlight=False
    )
    console.print(f"  integrity: {escape(printable(report.integrity, 1000))}", highlight=False)
    if report.model:
        console.print(f"  model: {escape(printable(report.model, 1000))}", highlight=False)
    if report.flow:
        console.print(f"  optical flow: {escape(printable(report.flow, 1000))}", highlight=False)
    notes = _Notes()
    table = Table(show_lines=False)
    table.add_column("precision", no_wrap=True)
    table.add_column("backend", no_wrap=True, overflow="ellipsis", max_width=40)
    table.add_column("runs here", no_wrap=True)
    for o in report.options:
        mark = "[green]yes[/]" if o.runs else f"[yellow]no[/] {notes.ref(printable(o.reason or '', 1000))}"
        table.add_row(escape(o.precision), escape(printable(o.backend)), mark)
    console.print(table)
    notes.print()
    for problem in report.problems:
        console.print(f"  [red]broken:[/] {escape(printable(problem, 1000))}", highlight=False)
    console.print(escape(report.summary()), highlight=False)
