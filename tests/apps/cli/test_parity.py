"""``parity pack`` options of issue 23: --log, --start, --box-shape, --operating-point; each misuse one
line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pairedge.apps.cli import app
from pairedge.compare.parity import load_pack
from typer.testing import CliRunner

runner = CliRunner()


def _pack(tmp_path: Path, *args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["parity", "pack", "default", "--out", str(tmp_path / "p.npz"), *args])
    return res.exit_code, res.output


def _one_error(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


def test_start_box_shape_and_operating_point_reach_the_pack(tmp_path: Path) -> None:
    code, out = _pack(
        tmp_path,
        "--scene",
        "static:4100",
        "--frames",
        "4",
        "--start",
        "3",
        "--box-shape",
        "ignore",
        "--operating-point",
        "surveillance",
    )
    assert code == 0, out
    flat = " ".join(out.split())  # Rich wraps at the terminal's width, which the tmp path length shifts
    assert "frames 3-6" in flat and "box shape ignored on 4 of 4 frames" in flat and "gate 0.65" in flat
    pk = load_pack(tmp_path / "p.npz")
    assert (pk.reference["start"], pk.reference["box_shape"], pk.reference["operating_point"]) == (
        3,
        "ignore",
        "surveillance",
    )
    from pairedge.apps.evaluation.sources import parse_scene

    fourth = list(parse_scene("static:4100", 7).open())[3]  # the clip's first frame is the stream's fourth
    assert pk.snapshot is not None and pk.timestamps[0] == fourth.timestamp
    assert (pk.image(0) == fourth.image).all()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--log", "{tmp}/video.mp4"], "not a ROS 2 log"),
        (["--log", "{tmp}/run.mcap", "--detections", "{tmp}/d.txt"], "--detections goes with --video"),
        (["--log", "{tmp}/run.mcap", "--scene", "static:0"], "give one clip"),
        (["--scene", "static:0", "--gold", "{tmp}/g.jsonl"], "--gold goes with --video or --log"),
        (["--scene", "static:0", "--box-shape", "sometimes"], "Invalid value"),
        (["--scene", "static:0", "--operating-point", "nowhere"], "nowhere"),
        (["--cad", "{tmp}/anno01.mat", "--start", "-1"], "Invalid value"),
        (["--scene", "static:0", "--start", "100000000"], "--start \\+ --frames"),
    ],
)
def test_misuse_is_one_line(tmp_path: Path, args: list[str], match: str) -> None:
    code, out = _pack(tmp_path, *[a.format(tmp=tmp_path) for a in args])
    assert code != 0
    if "Invalid value" in match:  # Typer's own usage error
        assert "Invalid value" in out
        return
    import re

    assert re.search(match, _one_error(out)), out


def test_start_past_the_end_of_the_source(tmp_path: Path) -> None:
    """A scene of start + frames frames always has them; a log of 6 frames does not have 10."""
    pytest.importorskip("rosbags.rosbag2", reason="the ros extra (rosbags) writes the log")
    sim = tmp_path / "sim"
    res = runner.invoke(app, ["simulate", "--frames", "6", "--out", str(sim), "--bag", "mcap"])
    assert res.exit_code == 0, res.output
    code, out = _pack(tmp_path, "--log", str(sim / "log"), "--start", "10", "--frames", "2")
    assert code == 1 and "--start 10: log:log has only 6 frames" in _one_error(out)
