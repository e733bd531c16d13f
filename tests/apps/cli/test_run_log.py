"""``pairedge simulate --bag`` and ``pairedge run LOG`` from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("rosbags")

from pairedge.apps.cli import app  # noqa: E402
from pairedge.core.bundled import default_model_dir  # noqa: E402


def test_simulate_bag_then_run_log(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "sim"
    res = runner.invoke(
        app,
        [
            "simulate",
            "--preset",
            "static",
            "--seed",
            "1",
            "--frames",
            "8",
            "--out",
            str(out),
            "--bag",
            "sqlite3",
        ],
    )
    assert res.exit_code == 0, res.output
    assert any((out / "log").glob("*.db3"))
    res = runner.invoke(app, ["run", str(out / "log"), "--list-topics"])
    assert (
        res.exit_code == 0
        and "/detections" in res.output
        and "vision_msgs/msg/Detection2DArray" in res.output
    )
    res = runner.invoke(
        app,
        [
            "run",
            str(out / "log"),
            "--out",
            str(tmp_path / "o"),
            "--no-video",
            "--out-bag",
            str(tmp_path / "o" / "bag"),
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["frames"] == 8 and summary["files"]["bag"].endswith("bag")


def test_log_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "sim"
    assert (
        runner.invoke(app, ["simulate", "--frames", "2", "--out", str(out), "--bag", "mcap"]).exit_code == 0
    )
    res = runner.invoke(
        app, ["run", str(out / "log"), "--image-topic", "/x[/]y", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 1
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "no topic '/x[/]y'" in lines[0]
    res = runner.invoke(app, ["run", str(out / "video.mp4"), "--out-bag", str(tmp_path / "b")])
    assert res.exit_code == 1 and "are for ROS 2 logs" in res.output
    res = runner.invoke(app, ["simulate", "--frames", "2", "--out", str(tmp_path / "s2"), "--bag", "zip"])
    assert res.exit_code == 1 and not (tmp_path / "s2").exists()


def test_run_precision_without_calibrated_files_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "sim"
    assert (
        runner.invoke(app, ["simulate", "--frames", "2", "--out", str(out), "--bag", "mcap"]).exit_code == 0
    )
    fp32_only = tmp_path / "fp32"  # the bundled folder ships int8 files: a folder without them
    fp32_only.mkdir()
    for stage in (1, 2):
        shutil.copy(default_model_dir() / f"stage{stage}.onnx", fp32_only)
    for source in ([str(out / "log")], [str(out / "video.mp4"), "--detections", str(out / "gt" / "gt.txt")]):
        res = runner.invoke(
            app,
            [
                "run",
                *source,
                "--model",
                str(fp32_only),
                "--precision",
                "int8",
                "--out",
                str(tmp_path / "o"),
                "--no-video",
            ],
        )
        lines = [line for line in res.output.splitlines() if line.strip()]
        assert res.exit_code == 1 and len(lines) == 1 and "pairedge calibrate" in lines[0]


def test_run_fps_must_be_finite(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["run", str(tmp_path / "v.mp4"), "-d", str(tmp_path / "d.txt"), "--fps", "inf"]
    )
    assert res.exit_code == 2 and "--fps" in res.output
