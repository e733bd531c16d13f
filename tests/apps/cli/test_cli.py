"""CLI boundary: help works with core deps only, doctor never crashes, PairedgeError -> exit 1, one line."""

from __future__ import annotations

import json

import typer
from pairedge.apps.cli import app
from pairedge.apps.cli.app import handle_errors
from pairedge.core.errors import FormatError
from typer.testing import CliRunner

runner = CliRunner()


def test_help_lists_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "doctor" in result.output


def test_doctor_table_and_json() -> None:
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    for name in ("python", "numpy", "opencv", "onnxruntime", "torch", "tensorrt", "CUDA driver", "nvcc"):
        assert name in result.output
    result = runner.invoke(app, ["doctor", "--json"])
    data = json.loads(result.output)
    assert data["numpy"]["ok"] is True
    assert set(data["tensorrt"]) == {"ok", "detail"}


def test_pairedge_error_becomes_exit_code_one_without_traceback() -> None:
    demo = typer.Typer()

    @demo.command()
    @handle_errors
    def boom() -> None:
        raise FormatError("gold.json", "expected 3 labels, got 2", record=7)

    result = runner.invoke(demo, [])
    assert result.exit_code == 1
    assert "gold.json, record 7: expected 3 labels, got 2" in result.output
    assert "Traceback" not in result.output
