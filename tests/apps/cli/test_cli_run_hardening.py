"""Issue 22, ``pairedge run`` / ``pairedge demo``: frames bounded in pixels before decoding, the missing path
said first, no stale outputs, a run that scored nothing (or never ran its flow) said and exit 1, the model
named, and tables that fit 80 columns without progress-bar residue when piped."""

from __future__ import annotations

import json
import os
import struct
import zlib
from io import StringIO
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.core import limits
from pairedge.core.errors import FormatError
from pairedge.measure.sim.output import write_scene
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.runner.inputs import FrameSource
from pairedge.runtime.runner.run import RunOptions, run_files
from run_demo_helpers import toy_model
from typer.testing import CliRunner

FRAMES = 8
runner = CliRunner()


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(simulator folder, its video, toy model folder)."""
    root = tmp_path_factory.mktemp("hard")
    files = write_scene("static", 3, FRAMES, root / "sim")
    return root / "sim", root / "sim" / files.video, toy_model(root / "model")


def png_bomb(width: int, height: int) -> bytes:
    """A 100-byte PNG whose header declares ``width x height`` RGB pixels (its data is one empty row)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0"))
        + chunk(b"IEND", b"")
    )


def _folder(video: Path, folder: Path) -> Path:
    folder.mkdir()
    for k, image in FrameSource(video):
        cv2.imwrite(str(folder / f"{k:06d}.png"), image)
    return folder


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


# -- item 1: image files and videos bounded in pixels before decoding
# -----------------------------------------
def test_an_image_bomb_in_a_folder_is_a_dropped_frame_with_its_reason(
    scene: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    sim, video, model = scene
    frames = _folder(video, tmp_path / "frames")
    (frames / "000003.png").write_bytes(png_bomb(20_000, 20_000))  # 1.2 GB decoded
    (frames / "000005.png").unlink()
    os.mkfifo(frames / "000005.png")  # a FIFO would block a reader that opens it
    summary = run_files(
        frames, sim / "gt/gt.txt", tmp_path / "out", RunOptions(Deployment(model), video=False)
    )
    assert summary.frames == FRAMES and summary.frames_scored == FRAMES - 2
    reasons = " | ".join(summary.frames_dropped)
    assert "000003.png" in reasons and "20000 x 20000" in reasons and "MAX_FRAME_PIXELS" in reasons
    assert "000005.png" in reasons and "FIFO" in reasons
    records = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()[1:]]
    assert "20000 x 20000" in records[3]["diagnostics"]["frame_dropped"]
    assert records[3]["tracks"]  # the frame's boxes still went on
    assert any("2 image file(s) refused" in n and "000003.png" in n for n in summary.notes)


def test_an_image_bomb_first_in_a_folder_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "000000.png").write_bytes(png_bomb(20_000, 20_000))
    with pytest.raises(FormatError, match=r"000000\.png.*20000 x 20000.*MAX_FRAME_PIXELS"):
        FrameSource(tmp_path)
    (tmp_path / "000000.png").write_bytes(b"not an image at all")
    with pytest.raises(FormatError, match="not an image pairedge can measure"):
        FrameSource(tmp_path)


def test_image_ceilings_are_read_at_call_time(
    scene: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, video, _ = scene
    frames = _folder(video, tmp_path / "frames")
    monkeypatch.setattr(limits, "MAX_IMAGE_BYTES", 100)  # every real PNG is larger
    with pytest.raises(FormatError, match="ceiling for an image file"):
        FrameSource(frames)


def test_a_video_above_the_pixel_ceiling_is_refused_before_decoding(
    scene: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, video, model = scene
    monkeypatch.setattr(limits, "MAX_FRAME_PIXELS", 1000)
    with pytest.raises(FormatError, match=r"640 x 480 pixels.*MAX_FRAME_PIXELS"):
        FrameSource(video)
    result = runner.invoke(
        app,
        [
            "run",
            str(video),
            "-d",
            str(sim / "gt/gt.txt"),
            "--model",
            str(model),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 1 and _lines(result.output)[-1].startswith("error:")
    assert len(_lines(result.output)) == 1, result.output


def test_a_video_path_that_is_a_fifo_is_refused_unopened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "clip.mp4")
    with pytest.raises(FormatError, match="FIFO"):
        FrameSource(tmp_path / "clip.mp4")


# -- item 3: a path that does not exist is said first
# ----------------------------------------------------------
@pytest.mark.parametrize("name", ["absent.mp4", "absent_folder", "absent.mcap", "absent.db3"])
def test_a_missing_source_says_no_such_file_first(tmp_path: Path, name: str) -> None:
    result = runner.invoke(app, ["run", str(tmp_path / name)])  # no --detections either
    assert result.exit_code == 1
    (line,) = _lines(result.output)
    assert "no such file or folder" in line and "--detections" not in line


# -- item 4: no outputs of an earlier run left beside the new ones
# --------------------------------------------
def test_outputs_of_an_earlier_run_are_removed_and_noted(
    scene: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    sim, video, model = scene
    out = tmp_path / "out"
    args = ["run", str(video), "-d", str(sim / "gt/gt.txt"), "--model", str(model), "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    assert (out / "annotated.mp4").is_file()
    (out / "annotated.avi").write_bytes(b"left by an older pairedge")
    (out / "notes.txt").write_text("the user's own file")
    again = runner.invoke(app, [*args, "--no-video"])
    assert again.exit_code == 0, again.output
    assert not (out / "annotated.mp4").exists() and not (out / "annotated.avi").exists()
    assert (out / "notes.txt").read_text() == "the user's own file"  # unknown files are never touched
    assert "removed annotated.mp4, annotated.avi of an earlier run" in again.output
    summary = json.loads((out / "summary.json").read_text())
    assert "video" not in summary["files"] and any("removed annotated.mp4" in n for n in summary["notes"])


def test_demo_removes_outputs_it_does_not_rewrite(tmp_path: Path) -> None:
    from pairedge.apps.demo import DemoOptions, cpu_deployment, run_demo

    model = toy_model(tmp_path / "model")
    out = tmp_path / "out"
    run_demo(out, DemoOptions(frames=4, deployment=cpu_deployment(model)))
    assert (out / "demo.mp4").is_file()
    result = run_demo(out, DemoOptions(frames=4, deployment=cpu_deployment(model), video=False))
    assert not (out / "demo.mp4").exists()
    assert any("removed demo.mp4 of an earlier run" in n for n in result.notes)


# -- item 5: nothing scored, or the flow never ran
# ------------------------------------------------------------
def test_a_flow_that_never_ran_is_said_in_the_summary(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, video, model = scene
    result = runner.invoke(
        app,
        [
            "run",
            str(video),
            "-d",
            str(sim / "gt/gt.txt"),
            "--model",
            str(model),
            "--out",
            str(tmp_path / "o"),
            "--no-video",
            "--flow-scale",
            "1e-9",
        ],
    )
    assert result.exit_code == 0, result.output  # the boxes were still scored
    assert "optical flow never ran" in result.output and "below the" in result.output
    assert any(
        line.split("│")[1:2] == [" frames with flow           "] for line in result.output.splitlines()
    )
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["flow_frames"] == 0 and summary["frames_scored"] == FRAMES
    assert "1x1 px" in summary["pipeline"]["flow_problem"]
    normal = run_files(video, sim / "gt/gt.txt", tmp_path / "n", RunOptions(Deployment(model), video=False))
    assert normal.flow_frames == FRAMES - 1 and not any("never ran" in n for n in normal.notes)


def test_a_run_that_scored_no_frame_exits_one(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, _, model = scene
    frames = tmp_path / "tiny"
    frames.mkdir()
    for k in range(4):  # 8 x 8 px: below the runtime's smallest frame, every frame is dropped
        cv2.imwrite(str(frames / f"{k:06d}.png"), np.full((8, 8, 3), 90, np.uint8))
    result = runner.invoke(
        app,
        [
            "run",
            str(frames),
            "-d",
            str(sim / "gt/gt.txt"),
            "--model",
            str(model),
            "--out",
            str(tmp_path / "o"),
            "--no-video",
        ],
    )
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no frame was scored: all 4 frames were dropped" in errors[0]
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["frames"] == 4 and summary["frames_scored"] == 0


def test_demo_says_when_its_flow_never_ran(tmp_path: Path) -> None:
    model = toy_model(tmp_path / "model")
    result = runner.invoke(
        app,
        [
            "demo",
            "--out",
            str(tmp_path / "o"),
            "--frames",
            "4",
            "--model",
            str(model),
            "--no-video",
            "--flow-scale",
            "1e-9",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "optical flow never ran" in result.output


# -- item 10: the model that ran is named
# ----------------------------------------------------------------------
def test_model_default_names_the_bundled_model(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    from pairedge.core.bundled import default_model_dir

    if not (default_model_dir() / "stage1.onnx").is_file():
        pytest.skip(f"the bundled default model is not in {default_model_dir()}")
    sim, video, _ = scene
    result = runner.invoke(
        app,
        [
            "run",
            str(video),
            "-d",
            str(sim / "gt/gt.txt"),
            "--model",
            "default",
            "--out",
            str(tmp_path / "o"),
            "--no-video",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "model: the bundled model pairedge-default" in result.output
    header = json.loads((tmp_path / "o" / "results.jsonl").read_text().splitlines()[0])
    assert header["model"].startswith("the bundled model pairedge-default")


def test_demo_names_its_model(tmp_path: Path) -> None:
    model = toy_model(tmp_path / "model")
    result = runner.invoke(
        app, ["demo", "--out", str(tmp_path / "o"), "--frames", "4", "--model", str(model), "--no-video"]
    )
    assert result.exit_code == 0 and f"model: {model}" in result.output.replace("\n", "")


# -- item 9: 80 columns, no progress residue when piped
# --------------------------------------------------------
def test_run_output_fits_80_columns_without_progress_residue(
    scene: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    sim, video, model = scene
    result = runner.invoke(
        app,
        [
            "run",
            str(video),
            "-d",
            str(sim / "gt/gt.txt"),
            "--model",
            str(model),
            "--out",
            str(tmp_path / "o"),
            "--no-video",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "\r" not in result.output and "\x1b" not in result.output  # no live-display residue
    assert [line for line in result.output.splitlines() if line.startswith("running ")] == [
        "running video.mp4 ...",
        next(x for x in result.output.splitlines() if x.startswith("running video.mp4:")),
    ]
    table = [line for line in result.output.splitlines() if line[:1] in "┌│└┏┃┡┗"]
    assert table and all(len(line) <= 80 for line in table)


def test_summary_table_fits_80_columns_with_long_labels_and_big_numbers() -> None:
    from dataclasses import replace

    from pairedge.apps.cli.summary import summary_table
    from pairedge.runtime.runner.run import RunStats
    from rich.console import Console

    long_label = "standing_together_near_the_entrance_of_the_building\nerror: x"
    summary = replace(
        RunStats(("walking_together", long_label)).summary(),
        frames=10**9,
        frames_scored=10**9,
        pairs=10**12,
        interacting=10**11,
        groups=10**10,
        interactions={"walking_together": 10**11, long_label: 12},
        fps=123456.0,
        wall_fps=9999.0,
        flow_frames=10**9 - 1,
    )
    console = Console(file=StringIO(), width=80, color_system=None)
    console.print(summary_table(summary, "pairedge run " + "a_very_long_video_name_" * 6 + ".mp4"))
    text = console.file.getvalue()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    for row in (
        "frames scored",
        "frames with flow",
        "pairs scored (pair-frames)",
        "interacting pair-frames",
        "FPS, end to end",
        "dropped detections",
        "step total",
        "1000000000000",
    ):
        assert any(row in line for line in lines), row  # whole, on one line: no wrap inside a word
    assert not any(line.lstrip("│ ").startswith("error:") for line in lines)  # the newline is escaped


def test_a_detection_file_that_is_a_device_or_folder_says_so(tmp_path: Path) -> None:
    """The true reason, not "no such file", for a detection path that exists but is not a regular file."""
    from pairedge.core.errors import FormatError
    from pairedge.runtime.runner.inputs import read_detections

    link = tmp_path / "det.txt"
    link.symlink_to("/dev/zero")
    with pytest.raises(FormatError, match="character device"):
        read_detections(link)
    with pytest.raises(FormatError, match="a folder"):
        read_detections(tmp_path)
    with pytest.raises(FormatError, match="no such file"):
        read_detections(tmp_path / "missing.txt")


def test_an_eval_that_scored_no_frame_exits_one_as_run_does(
    scene: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """``eval`` on a source without a usable frame: not exit 0 with null metrics and "no ground truth", but
    the one line ``run`` gives on the same input (issue 40, case 7)."""
    sim, _, model = scene
    frames = tmp_path / "tiny"
    frames.mkdir()
    for k in range(4):
        cv2.imwrite(str(frames / f"{k:06d}.png"), np.full((8, 8, 3), 90, np.uint8))
    gold = next(sim.rglob("pairs_gt_paper3.jsonl"))
    result = runner.invoke(
        app,
        [
            "eval",
            str(model),
            "--data",
            str(frames),
            "--detections",
            str(sim / "gt/gt.txt"),
            "--gold",
            str(gold),
            "--out",
            str(tmp_path / "e"),
        ],
    )
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no frame was scored: all 4 frames were dropped" in errors[0], result.output
