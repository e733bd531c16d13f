"""``pairedge run LOG`` / ``--list-topics`` / ``--out-bag`` and ``simulate --bag`` from the command line:
output storage that follows the name, no partial output bag, names from logs escaped, dependencies first."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("rosbags")

from pairedge.apps.cli import app  # noqa: E402
from pairedge.apps.ros.write import write_log  # noqa: E402

SQLITE_MAGIC = b"SQLite format 3\x00"
MCAP_MAGIC = b"\x89MCAP0\r\n"


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("storage", "name", "magic"),
    [
        ("mcap", "x.db3", SQLITE_MAGIC),
        ("sqlite3", "x.mcap", MCAP_MAGIC),
        ("mcap", "copy", None),
        ("sqlite3", "copy", None),
    ],
)
def test_out_bag_storage_follows_its_name(sim_frames, tmp_path: Path, storage, name, magic) -> None:
    write_log(sim_frames[:4], tmp_path / "log", storage=storage)
    target = tmp_path / "o" / name
    res = CliRunner().invoke(
        app,
        ["run", str(tmp_path / "log"), "--out", str(tmp_path / "o"), "--no-video", "--out-bag", str(target)],
    )
    assert res.exit_code == 0, res.output
    if magic is not None:  # a bare file in the storage its suffix names
        assert target.is_file() and target.read_bytes()[: len(magic)] == magic
    else:  # a folder: the input's storage
        assert (target / "metadata.yaml").is_file()
        assert any(target.glob("*.mcap" if storage == "mcap" else "*.db3"))
    topics = CliRunner().invoke(app, ["run", str(target), "--list-topics"])
    assert topics.exit_code == 0 and "/pairedge/interactions" in topics.output
    assert [p.name for p in (tmp_path / "o").iterdir() if p.name.startswith(".pairedge-bag")] == []


def test_a_failed_run_leaves_no_partial_output_bag(sim_frames, tmp_path: Path, monkeypatch) -> None:
    from pairedge.apps.ros import runner

    write_log(sim_frames[:6], tmp_path / "log", storage="mcap")
    original = runner.RosRunner.step
    calls = [0]

    def failing(self, frame):
        calls[0] += 1
        if calls[0] == 4:
            raise RuntimeError("disk full")
        return original(self, frame)

    monkeypatch.setattr(runner.RosRunner, "step", failing)
    for name in ("bag", "bag.mcap"):
        calls[0] = 0
        out = tmp_path / f"o_{name}"
        res = CliRunner().invoke(
            app,
            [
                "run",
                str(tmp_path / "log"),
                "--out",
                str(out),
                "--no-video",
                "--out-bag",
                str(tmp_path / "bags" / name),
            ],
        )
        assert res.exit_code == 1 and "disk full" in res.output
        assert not (
            tmp_path / "bags"
        ).exists()  # neither the bag, its temporary folder nor the folder made for it


def test_an_existing_out_bag_is_refused_before_any_work(sim_frames, tmp_path: Path) -> None:
    write_log(sim_frames[:2], tmp_path / "log", storage="mcap")
    (tmp_path / "taken.db3").write_bytes(b"keep me")
    res = CliRunner().invoke(
        app,
        [
            "run",
            str(tmp_path / "log"),
            "--out",
            str(tmp_path / "o"),
            "--out-bag",
            str(tmp_path / "taken.db3"),
        ],
    )
    assert res.exit_code == 1 and len(_lines(res.output)) == 1 and "exists" in res.output
    assert (tmp_path / "taken.db3").read_bytes() == b"keep me" and not (tmp_path / "o").exists()


def test_a_missing_log_is_reported_as_a_missing_log(tmp_path: Path) -> None:
    for name in ("run.mcap", "run.db3"):
        res = CliRunner().invoke(app, ["run", str(tmp_path / name), "--list-topics"])
        lines = _lines(res.output)
        assert res.exit_code == 1 and len(lines) == 1 and "no such file or folder" in lines[0]
        assert "ROS 2 log" in lines[0] and "--detections is required" not in lines[0]


def test_names_from_a_log_cannot_start_a_line_of_their_own(frame_messages, write_messages, tmp_path) -> None:
    """A topic, type and frame id with newlines and escape sequences: echoed escaped everywhere."""
    evil = "/cam\nerror: all good\x1b[2J"

    def rename(messages):
        return [(evil if t == "/camera/image_raw" else t, ty, m, lt) for t, ty, m, lt in messages]

    def frame_id(k, msg):
        msg.header.frame_id = "cam\nerror: frame"
        return msg

    log = write_messages(tmp_path / "log", rename(frame_messages(image=frame_id)))
    runner = CliRunner()
    for args in (
        ["--list-topics"],
        ["--out", str(tmp_path / "o"), "--no-video"],
        ["--image-topic", "/nope\nerror: x", "--out", str(tmp_path / "o2")],
    ):
        res = runner.invoke(app, ["run", str(log), *args])
        starts = [line for line in res.output.splitlines() if line.lstrip().startswith("error:")]
        assert len(starts) <= 1 and "\x1b" not in res.output, res.output
        if starts:  # the one real error line, with the names escaped inside it
            assert res.exit_code == 1 and "\\nerror: x" in starts[0]
        else:
            assert res.exit_code == 0, res.output
        assert "all good" not in res.output or "\\nerror: all good" in res.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["frames"] == 10 and any("\\nerror: all good" in n for n in summary["notes"])


def test_simulate_bag_without_rosbags_fails_before_rendering(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "rosbags.rosbag2", None)  # import fails as if not installed
    res = CliRunner().invoke(
        app, ["simulate", "--frames", "3", "--out", str(tmp_path / "s"), "--bag", "mcap"]
    )
    lines = _lines(res.output)
    assert res.exit_code == 1 and len(lines) == 1 and "pip install '.[ros]'" in lines[0]
    assert not (tmp_path / "s").exists()  # nothing rendered
    res = CliRunner().invoke(app, ["simulate", "--frames", "1000000000", "--out", str(tmp_path / "s")])
    assert res.exit_code == 1 and "ceiling" in res.output and not (tmp_path / "s").exists()


def test_simulate_bag_into_a_taken_log_folder_fails_before_rendering(tmp_path: Path) -> None:
    (tmp_path / "s" / "log").mkdir(parents=True)
    res = CliRunner().invoke(
        app, ["simulate", "--frames", "3", "--out", str(tmp_path / "s"), "--bag", "mcap"]
    )
    assert res.exit_code == 1 and len(_lines(res.output)) == 1 and "exists" in res.output
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["log"]  # nothing rendered
