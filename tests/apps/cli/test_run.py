"""``pairedge run`` end to end on a small simulated video with MOT / JRDB / image-folder inputs, and its
failures (corrupt or truncated video, bad detection file, missing model): exit 1 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from pairedge.apps.cli import app
from pairedge.core.errors import FormatError, ModelError
from pairedge.core.io.mot import read_mot
from pairedge.core.sim.output import write_scene
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.runner.inputs import FrameSource, read_detections
from pairedge.runtime.runner.run import RunOptions, resolve_model, run_files
from run_demo_helpers import toy_model, video_frames
from typer.testing import CliRunner

FRAMES = 12
runner = CliRunner()


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(simulator output folder, video or frame folder, toy model folder)."""
    root = tmp_path_factory.mktemp("run")
    files = write_scene("static", 3, FRAMES, root / "sim")
    video = root / "sim" / files.video
    return root / "sim", video, toy_model(root / "model")


def _records(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return lines[0], lines[1:]


def test_run_mot_ground_truth(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, video, model = scene
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["run", str(video), "-d", str(sim / "gt/gt.txt"), "--model", str(model), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    for text in (
        "frames scored",
        "interacting pair-frames",
        "step total",
        "p99",
        "FPS",
        "1-based",
        "model: ",
    ):
        assert text in result.output
    header, records = _records(out / "results.jsonl")
    assert header["labels"] == ["walking_together", "standing_together", "sitting_together"]
    assert [r["frame"] for r in records] == list(range(FRAMES))
    assert {"timestamp", "interactions", "groups", "tracks", "timings_ms", "diagnostics"} <= set(records[0])
    # MOT frame 1 is video frame 0: the boxes of JSONL frame 0 are those of MOT frame 1
    gt = read_mot(sim / "gt/gt.txt").by_frame()[1]
    tracks = {t["id"]: t["box"] for t in records[0]["tracks"]}
    for tid, box in zip(gt.track_ids.tolist(), gt.boxes.tolist(), strict=True):
        assert np.allclose(tracks[tid], box, atol=0.01)
    for r in records:
        for i in r["interactions"]:
            assert i["ids"][0] < i["ids"][1] and 0.0 <= i["p_interact"] <= 1.0 and len(i["probs"]) == 3
    assert video_frames(out / "annotated.mp4") == FRAMES
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == FRAMES and summary["error"] is None
    assert summary["interacting"] == sum(summary["interactions"].values())
    assert summary["pairs"] == sum(len(r["tracks"]) * (len(r["tracks"]) - 1) // 2 for r in records)


def test_results_score_directly(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, video, model = scene
    run_files(video, sim / "gt/gt.txt", tmp_path, RunOptions(Deployment(model), video=False))
    gold = sim / "pairs_gt_paper3.jsonl"
    result = runner.invoke(
        app,
        ["score", "--protocol", "pairwise", "--pred", str(tmp_path / "results.jsonl"), "--gold", str(gold)],
    )
    assert result.exit_code == 0, result.output
    assert "pair_f1" in result.output
    assert not (tmp_path / "annotated.mp4").exists()


def test_run_raw_detections_go_through_the_tracker(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, video, model = scene
    assert not read_detections(sim / "det/det.txt").with_ids
    summary = run_files(
        video, sim / "det/det.txt", tmp_path, RunOptions(Deployment(model), video=False, max_frames=8)
    )
    assert summary.frames == 8
    assert any("built-in tracker" in n for n in summary.notes)
    _, records = _records(tmp_path / "results.jsonl")
    ids = [t["id"] for r in records for t in r["tracks"]]
    assert ids and min(ids) >= 0
    assert summary.tracks >= 2


def test_run_image_folder_and_jrdb(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, video, model = scene
    frames = tmp_path / "frames"
    frames.mkdir()
    source = FrameSource(video)
    for k, image in source:
        assert image is not None
        cv2.imwrite(str(frames / f"{k:06d}.png"), image)
    summary = run_files(
        frames,
        sim / "labels_2d_activity_social_stitched.json",
        tmp_path / "out",
        RunOptions(Deployment(model), fps=15.0),
    )
    assert summary.frames == FRAMES and summary.error is None
    assert video_frames(Path(summary.files["video"])) == FRAMES
    jrdb = read_detections(sim / "labels_2d_activity_social_stitched.json")
    _, records = _records(tmp_path / "out" / "results.jsonl")
    assert sorted(t["id"] for t in records[0]["tracks"]) == sorted(jrdb.get(0).track_ids.tolist())
    assert records[3]["timestamp"] == pytest.approx(3 / 15.0)


def test_corrupt_video_exits_one_line(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, _, model = scene
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    result = runner.invoke(
        app,
        ["run", str(bad), "-d", str(sim / "gt/gt.txt"), "--model", str(model), "--out", str(tmp_path / "o")],
    )
    assert result.exit_code == 1
    assert "cannot open as a video" in result.output and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1


def test_truncated_video_stops_cleanly(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    sim, video, model = scene
    full = tmp_path / "full.avi"
    writer = cv2.VideoWriter(str(full), cv2.VideoWriter.fourcc(*"MJPG"), 15, FrameSource(video).size)
    for _, image in FrameSource(video):
        writer.write(image)
    writer.release()
    data = full.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[: len(data) // 2])
    result = runner.invoke(
        app,
        [
            "run",
            str(cut),
            "-d",
            str(sim / "gt/gt.txt"),
            "--model",
            str(model),
            "--out",
            str(tmp_path / "o"),
            "--no-video",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "truncated or corrupt" in result.output and "Traceback" not in result.output
    _, records = _records(tmp_path / "o" / "results.jsonl")
    assert 0 < len(records) < FRAMES
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["error"]


def test_bad_detection_file_exits_one_line(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, video, model = scene
    bad = tmp_path / "det.txt"
    bad.write_text("1,-1,10,10,20,40,0.9\n2,-1,10,10,oops,40,0.9\n")
    result = runner.invoke(
        app, ["run", str(video), "-d", str(bad), "--model", str(model), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1
    assert "det.txt, record 2" in result.output and "Traceback" not in result.output
    with pytest.raises(FormatError, match="unknown detection format"):
        read_detections(video)


def test_missing_inputs_and_model(
    scene: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, video, _ = scene
    result = runner.invoke(
        app, ["run", str(tmp_path / "absent.mp4"), "-d", str(sim / "gt/gt.txt"), "--model", str(tmp_path)]
    )
    assert result.exit_code == 1 and "no such file" in result.output
    with pytest.raises(FormatError, match="expected image files"):
        FrameSource(tmp_path)
    import pairedge.core.bundled

    monkeypatch.setattr(pairedge.core.bundled, "default_model_dir", lambda: tmp_path / "none")
    with pytest.raises(ModelError, match="bundled default model is missing"):
        resolve_model(None)


def test_cvml_detections_map_frame_numbers_as_written(tmp_path: Path) -> None:
    xml = tmp_path / "gt.xml"
    xml.write_text(
        '<?xml version="1.0"?><dataset>'
        '<frame number="0"><objectlist><object id="4"><box h="80" w="30" xc="100" yc="60"/></object>'
        '<object id="7"><box h="60" w="20" xc="200" yc="90"/></object></objectlist></frame>'
        '<frame number="1"><objectlist/></frame>'
        '<frame number="2"><objectlist><object id="4"><box h="80" w="30" xc="104" yc="60"/></object>'
        "</objectlist></frame></dataset>"
    )
    dets = read_detections(xml)
    assert dets.format == "cvml" and dets.boxes == 3 and dets.with_ids
    assert sorted(dets.get(0).track_ids.tolist()) == [4, 7]
    assert len(dets.get(1)) == 0 and dets.last_frame == 2
    np.testing.assert_allclose(dets.get(2).boxes[0], [89, 20, 30, 80])


def test_operating_point_and_confirm_options(scene: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """--confirm-s, --operating-point and --box-shape reach the pipeline (summary.json says what ran); an
    unknown point is one error line naming the model's points."""
    sim, video, _ = scene
    args = ["run", str(video), "-d", str(sim / "gt/gt.txt"), "--no-video"]
    ok = runner.invoke(
        app,
        [
            *args,
            "--out",
            str(tmp_path / "a"),
            "--operating-point",
            "surveillance",
            "--confirm-s",
            "0.25",
            "--box-shape",
            "ignore",
        ],
    )
    assert ok.exit_code == 0, ok.output
    pipeline = json.loads((tmp_path / "a" / "summary.json").read_text())["pipeline"]
    assert pipeline["operating_point"] == "surveillance" and pipeline["confirm_s"] == 0.25
    assert pipeline["box_shape"] == "ignore"
    assert (
        runner.invoke(app, [*args, "--out", str(tmp_path / "c"), "--box-shape", "sometimes"]).exit_code == 2
    )
    assert pipeline["tau_interact"] == resolve_model_point("surveillance")["p_interact"]
    bad = runner.invoke(app, [*args, "--out", str(tmp_path / "b"), "--operating-point", "indoor"])
    assert bad.exit_code == 1 and "no operating point 'indoor'" in bad.output and "surveillance" in bad.output
    assert len([x for x in bad.output.splitlines() if x.strip()]) == 1


def resolve_model_point(name: str) -> dict[str, float]:
    from pairedge.runtime.loading import find_models

    return find_models(resolve_model(None)).operating_point(name)
