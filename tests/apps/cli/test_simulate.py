"""``pairedge simulate`` writes every file, and the real readers read back exactly what was simulated."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.core.io.jrdb import read_jrdb
from pairedge.core.io.mot import read_mot
from pairedge.core.io.par import read_par
from pairedge.core.io.stickmen import read_stickmen_images
from pairedge.core.labels import SIM7
from pairedge.measure.metrics.pairwise import score_files
from pairedge.measure.metrics.pairwise.files import read_pairwise_file
from pairedge.measure.sim import SIM_ACTIONS, SimFrame, simulate
from typer.testing import CliRunner

PRESET, SEED, FRAMES = "moving", 3, 12


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[SimFrame]]:
    out = tmp_path_factory.mktemp("sim")
    args = [
        "simulate",
        "--preset",
        PRESET,
        "--seed",
        str(SEED),
        "--frames",
        str(FRAMES),
        "--out",
        str(out),
        "--preview",
        "2",
        "--png",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "walking_together" in result.output
    return out, list(simulate(PRESET, SEED, FRAMES))


def test_every_file_is_written(written: tuple[Path, list[SimFrame]]) -> None:
    out, _ = written
    for name in (
        "video.mp4",
        "gt/gt.txt",
        "det/det.txt",
        "det/tracked.txt",
        "stickmen.txt",
        "par_labels.jsonl",
        "labels_2d_activity_social_stitched.json",
        "pairs_gt.jsonl",
        "pairs_gt_paper3.jsonl",
        "scene.json",
    ):
        assert (out / name).stat().st_size > 0, name
    assert len(list((out / "frames").glob("*.png"))) == FRAMES
    previews = sorted((out / "preview").glob("*.png"))
    assert [p.name for p in previews] == ["preview_000000.png", f"preview_{FRAMES - 1:06d}.png"]
    info = json.loads((out / "scene.json").read_text())
    assert (info["preset"], info["seed"], info["frames"], info["width"], info["height"]) == (
        PRESET,
        SEED,
        FRAMES,
        424,
        240,
    )
    assert info["labels"] == list(SIM7.classes) and info["fps"] == 15.0


def test_frames_are_the_simulated_images(written: tuple[Path, list[SimFrame]]) -> None:
    out, frames = written
    png = cv2.imread(str(out / "frames" / "000005.png"))
    assert np.array_equal(png, frames[5].image)
    video = cv2.VideoCapture(str(out / "video.mp4"))
    ok, first = video.read()
    assert ok and first.shape == frames[0].image.shape
    assert np.abs(first.astype(int) - frames[0].image).mean() < 8  # lossy codec, same picture


def test_mot_files_hold_truth_and_detections(written: tuple[Path, list[SimFrame]]) -> None:
    out, frames = written
    gt = read_mot(out / "gt/gt.txt").by_frame()
    det = read_mot(out / "det/det.txt")
    tracked = read_mot(out / "det/tracked.txt").by_frame()
    assert (det.track_id == -1).all()
    for f in frames:
        g = gt.get(f.index + 1)
        assert g is not None
        np.testing.assert_array_equal(g.boxes, f.truth.boxes)
        np.testing.assert_array_equal(g.track_ids, f.truth.track_ids)
        np.testing.assert_allclose(tracked[f.index + 1].boxes, f.detections.boxes, atol=6e-4)
        np.testing.assert_array_equal(tracked[f.index + 1].track_ids, f.detections.track_ids)


def test_jrdb_file_round_trips(written: tuple[Path, list[SimFrame]]) -> None:
    out, frames = written
    jrdb = read_jrdb(out / "labels_2d_activity_social_stitched.json")
    assert [j.frame for j in jrdb] == [f.index for f in frames]
    for j, f in zip(jrdb, frames, strict=True):
        assert j.image == f"{f.index:06d}.jpg"
        np.testing.assert_array_equal(j.people.boxes, f.truth.boxes)
        np.testing.assert_array_equal(j.people.track_ids, f.truth.track_ids)
        np.testing.assert_array_equal(j.group_ids, f.group_ids)
        keep = f.pair_labels != SIM7.index("no_interaction")
        np.testing.assert_array_equal(j.pairs, f.pairs[keep])
        np.testing.assert_array_equal(j.label_ids(SIM7), f.pair_labels[keep])
        for k, acts in enumerate(j.actions):
            assert sorted(acts) == sorted(SIM_ACTIONS[a] for a in np.flatnonzero(f.actions[k]))
        assert {g.group_id: g.members.tolist() for g in f.groups} == {
            k: v.tolist() for k, v in j.groups().items()
        }


def test_stickmen_and_par_round_trip(written: tuple[Path, list[SimFrame]]) -> None:
    out, frames = written
    images = read_stickmen_images(out / "stickmen.txt")
    assert [i.name for i in images] == [f"{f.index:06d}" for f in frames]
    for image, f in zip(images, frames, strict=True):
        np.testing.assert_allclose(image.sticks, f.stickmen, atol=1e-4)
    par = read_par(out / "par_labels.jsonl")
    for p, f in zip(par, frames, strict=True):
        assert p.frame == f.index
        np.testing.assert_array_equal(p.person_ids, f.truth.track_ids)
        np.testing.assert_array_equal(p.actions[:, : len(SIM_ACTIONS)], f.actions)
        assert [g.tolist() for g in p.groups] == [g.members.tolist() for g in f.groups]


def test_pairwise_ground_truth_scores_itself_perfectly(written: tuple[Path, list[SimFrame]]) -> None:
    out, frames = written
    gold = read_pairwise_file(out / "pairs_gt.jsonl", SIM7.classes)
    labelled = sum(int((f.pair_labels != SIM7.index("no_interaction")).sum()) for f in frames)
    assert len(gold.pairs.frame) == labelled
    for path in ("pairs_gt.jsonl", "pairs_gt_paper3.jsonl"):
        report = score_files(out / path, out / path)
        assert report.summary["accuracy"] == 1.0 and report.summary["pair_f1"] == 1.0


def test_bad_arguments_exit_with_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["simulate", "--preset", "nope", "--out", str(tmp_path / "x")])
    assert result.exit_code == 1 and "unknown simulator preset" in result.output
    (tmp_path / "file").write_text("")
    result = runner.invoke(app, ["simulate", "--frames", "2", "--out", str(tmp_path / "file")])
    assert result.exit_code == 1 and "expected a folder" in result.output


class _NoCodec:
    """A VideoWriter whose codec is missing (as in OpenCV builds without FFmpeg)."""

    def __init__(self, *args: object) -> None:
        pass

    def isOpened(self) -> bool:  # noqa: N802  (OpenCV's name)
        return False

    @staticmethod
    def fourcc(*chars: str) -> int:
        return 0


def test_png_fallback_when_the_codec_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pairedge.measure.sim.output import write_scene

    monkeypatch.setattr(cv2, "VideoWriter", _NoCodec)
    result = write_scene("static", 0, 3, tmp_path)
    assert result.video == "frames/" and any("PNG" in n for n in result.notes)
    assert sorted(p.name for p in (tmp_path / "frames").iterdir()) == [
        "000000.png",
        "000001.png",
        "000002.png",
    ]
    assert not (tmp_path / "video.mp4").exists()
    assert json.loads((tmp_path / "scene.json").read_text())["video"] == "frames/"
