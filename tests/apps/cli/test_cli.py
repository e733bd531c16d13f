"""CLI boundary: help works with core deps only, doctor never crashes, PairedgeError -> exit 1, one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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


# -- cli_deployment: The commands build their Deployment once, from the generated options of the run
# settings: a wrong precision, classifier backend or flow backend is one error line before any work (no output
# folder, no pack read, no source run). A name outside a setting's choices is a usage error (exit 2) listing
# them; a backend name (aliases accepted) is judged by the Deployment (exit 1).


WRONG = [
    (["--precision", "fp8"], "Invalid value for '--precision'"),
    (["--backend", "tensorflow"], "unknown classifier backend 'tensorflow'"),
    (["--flow", "opencv"], "Invalid value for '--flow'"),
]


def _one_error_line(res, needle: str) -> None:  # type: ignore[no-untyped-def]
    assert res.exit_code == (2 if needle.startswith("Invalid value") else 1), res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], res.stderr


@pytest.mark.parametrize(("option", "needle"), WRONG)
def test_run_refuses_a_wrong_deployment_before_the_video(
    option: list[str], needle: str, tmp_path: Path
) -> None:
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"not a video")  # never opened: the deployment is judged first
    res = runner.invoke(
        app,
        [
            "run",
            str(video),
            "--detections",
            str(tmp_path / "none.txt"),
            "--out",
            str(tmp_path / "out"),
            *option,
        ],
    )
    _one_error_line(res, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("option", "needle"), WRONG)
def test_eval_refuses_a_wrong_deployment_before_any_source(
    option: list[str], needle: str, tmp_path: Path
) -> None:
    res = runner.invoke(
        app,
        ["eval", "default", "--data", "sim:static:seeds=0:frames=3", "--out", str(tmp_path / "out"), *option],
    )
    _one_error_line(res, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("option", "needle"), WRONG)
def test_parity_check_refuses_a_wrong_deployment_before_the_pack(
    option: list[str], needle: str, tmp_path: Path
) -> None:
    res = runner.invoke(app, ["parity", "check", str(tmp_path / "never_read.npz"), "default", *option])
    _one_error_line(res, needle)


@pytest.mark.parametrize(("option", "needle"), WRONG[1:])
def test_parity_pack_refuses_a_wrong_reference_before_the_clip(
    option: list[str], needle: str, tmp_path: Path
) -> None:
    res = runner.invoke(app, ["parity", "pack", "default", "--out", str(tmp_path / "p.npz"), *option])
    _one_error_line(res, needle)
    assert not (tmp_path / "p.npz").exists()


def test_eval_prints_the_deployment(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "eval",
            "default",
            "--data",
            "sim:static:seeds=1000:frames=3",
            "--backend",
            "ort-cpu",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "model: the bundled model pairedge-default" in res.stdout
    assert "precision fp32, classifier backend onnxruntime, flow auto" in res.stdout.replace("\n", " ")
