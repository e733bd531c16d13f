"""``pairedge run`` end to end on a small simulated video with MOT / JRDB / image-folder inputs, and its
failures (corrupt or truncated video, bad detection file, missing model): exit 1 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from detector_models import detr_model, raw_model, ultralytics_model
from pairedge.apps.cli import app
from pairedge.core.errors import FormatError, ModelError
from pairedge.core.io.mot import read_mot
from pairedge.measure.sim.output import write_scene
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.detectors.hog import HogDetector
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


# -- cli_run_detector: ``pairedge run`` without a detection file: an ONNX --detector built to emit known
# boxes, the bundled YOLOX-Nano by default, HOG on request, and the guard that stops a detector whose output
# is implausible.


#: Frame-pixel x1 y1 x2 y2 of three people (480 x 640 frames -> 320 x 320 input: scale 0.5, pad_y 40).
PEOPLE = np.array([[100, 100, 160, 260], [300, 50, 360, 200], [450, 200, 520, 380]], np.float32)
DUPLICATE = PEOPLE[0] + 3


def frames(folder: Path, n: int = 4) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        cv2.imwrite(str(folder / f"{i:04d}.png"), rng.integers(0, 255, (480, 640, 3), np.uint8))
    return folder


def network(xyxy: np.ndarray) -> np.ndarray:
    """Frame pixels -> the 320 x 320 input of a centred letterbox (Ultralytics)."""
    return xyxy * 0.5 + np.array([0, 40, 0, 40], np.float32)


def stretched(xyxy: np.ndarray) -> np.ndarray:
    """Frame pixels -> the 320 x 320 input of a plain resize (RT-DETR's deploy script)."""
    return xyxy * np.array([0.5, 320 / 480, 0.5, 320 / 480], np.float32)


def tracks(out: Path) -> list[np.ndarray]:
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [np.array(sorted(t["box"] for t in r["tracks"])) for r in lines[1:]]


def expected() -> np.ndarray:
    return np.array(sorted(np.concatenate([PEOPLE[:, :2], PEOPLE[:, 2:] - PEOPLE[:, :2]], axis=1).tolist()))


@pytest.mark.parametrize("layout", ["ultralytics", "detr"])
def test_run_with_an_onnx_detector_reports_the_encoded_boxes(tmp_path: Path, layout: str) -> None:
    frame_boxes = np.concatenate([PEOPLE, DUPLICATE[None]])
    boxes = network(frame_boxes) if layout == "ultralytics" else stretched(frame_boxes)
    scores = np.array([0.9, 0.85, 0.8, 0.7], np.float32)
    if layout == "ultralytics":
        cxcywh = np.concatenate([(boxes[:, :2] + boxes[:, 2:]) / 2, boxes[:, 2:] - boxes[:, :2]], axis=1)
        model = ultralytics_model(tmp_path / "det.onnx", np.concatenate([cxcywh, scores[:, None]], axis=1))
    else:
        model = detr_model(tmp_path / "det.onnx", boxes, scores, np.zeros(4, np.int64))
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "run",
            str(frames(tmp_path / "img")),
            "--detector",
            str(model),
            "--model",
            str(toy_model(tmp_path / "model")),
            "--no-video",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    found = tracks(out)
    assert len(found) == 4
    for boxes_of_frame in found:
        np.testing.assert_allclose(boxes_of_frame, expected(), atol=0.02)
    summary = json.loads((out / "summary.json").read_text())
    assert any("no detection file: people found by ONNX detector det.onnx" in n for n in summary["notes"])
    assert any("ms per frame" in n for n in summary["notes"])


def test_run_with_a_bad_detector_is_one_line(tmp_path: Path) -> None:
    model = raw_model(tmp_path / "bad.onnx", {"out": np.zeros((1, 84))})
    result = runner.invoke(
        app,
        [
            "run",
            str(frames(tmp_path / "img", 1)),
            "--detector",
            str(model),
            "--model",
            str(toy_model(tmp_path / "model")),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 1
    assert "unknown detector layout" in result.output and "Traceback" not in result.output


def test_detections_and_detector_exclude_each_other(tmp_path: Path) -> None:
    mot = tmp_path / "d.txt"
    mot.write_text("1,-1,10,10,20,40,1,-1,-1,-1\n")
    result = runner.invoke(
        app, ["run", str(frames(tmp_path / "img", 1)), "-d", str(mot), "--detector", "hog"]
    )
    assert result.exit_code == 1 and "exclude each other" in result.output


def test_run_video_without_detections_uses_the_bundled_detector(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "out"
    video = shared_data / "pets09_s2l1" / "vtest.avi"
    result = runner.invoke(app, ["run", str(video), "--max-frames", "20", "--no-video", "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert any("YOLOX-Nano (bundled, Apache-2.0) (yolox-raw" in n for n in summary["notes"])
    assert (
        summary["people_per_frame"] >= 3
    )  # measured 3.15 (the tracker confirms people over the first frames)


@pytest.mark.skipif(
    HogDetector.unavailable_reason() is not None, reason=str(HogDetector.unavailable_reason())
)
def test_run_video_with_hog_on_request(tmp_path: Path, shared_data: Path) -> None:
    out = tmp_path / "out"
    video = shared_data / "pets09_s2l1" / "vtest.avi"
    result = runner.invoke(
        app, ["run", str(video), "--detector", "hog", "--max-frames", "3", "--no-video", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert any("OpenCV HOG people detector" in n for n in summary["notes"])
    assert summary["people_per_frame"] >= 3


def test_an_implausible_detector_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """A detector whose every box is 3 x 3 px: exit 1, one line naming it and its layout, no results."""
    tiny = np.array([[40 + 10 * i, 40, 1.5, 1.5, 0.9] for i in range(6)], np.float32)  # cx cy w h score
    model = ultralytics_model(tmp_path / "tiny.onnx", tiny)
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "run",
            str(frames(tmp_path / "img", 10)),
            "--detector",
            str(model),
            "--model",
            str(toy_model(tmp_path / "model")),
            "--no-video",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 1
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1 and "tiny.onnx" in errors[0] and "layout ultralytics" in errors[0]
    assert "--detector-layout" in errors[0] and "Traceback" not in result.output
    records = (out / "results.jsonl").read_text().splitlines() if (out / "results.jsonl").exists() else []
    assert len(records) <= 1  # at most the header: no frame of phantoms was written


def test_a_raw_yolox_read_as_decoded_stops_the_run(tmp_path: Path) -> None:
    """The bundled raw YOLOX-Nano forced to the decoded layout: grid offsets become corner phantoms."""
    from pairedge.measure.sim import Scene, get_preset

    folder = tmp_path / "scene"
    folder.mkdir()
    for f in Scene(get_preset("static", 1000), 1000).frames(10):
        cv2.imwrite(str(folder / f"{f.index:04d}.png"), f.image)
    base = ["run", str(folder), "--model", str(toy_model(tmp_path / "model")), "--no-video"]
    result = runner.invoke(app, [*base, "--detector-layout", "yolox", "--out", str(tmp_path / "bad")])
    assert (
        result.exit_code == 1
        and "not plausible people" in result.output
        and "layout yolox (forced" in result.output
    )
    result = runner.invoke(app, [*base, "--out", str(tmp_path / "good")])
    assert result.exit_code == 0, result.output
    assert "--detector-layout" not in result.output


def test_detector_layout_goes_with_a_network_detector(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "run",
            str(frames(tmp_path / "img", 1)),
            "--detector",
            "hog",
            "--detector-layout",
            "yolox",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 1 and "HOG detector has no output layout" in result.output


def test_a_detector_input_above_the_ceiling_is_refused_before_a_session(tmp_path: Path) -> None:
    """A declared ``[1, 3, 20000, 20000]`` input (5.9 GB a frame) is one line naming the ceiling, checked on
    the graph before ONNX Runtime makes a session (issue 40, case 2)."""
    import onnx
    from onnx import TensorProto, helper
    from pairedge.core import limits
    from pairedge.core.errors import ModelError
    from pairedge.runtime.detectors.graph import read_detector_graph

    side = limits.MAX_DETECTOR_INPUT_SIDE * 5
    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, side, side])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, side, side])
    graph = helper.make_graph([helper.make_node("Identity", ["images"], ["output"])], "g", [image], [out])
    path = tmp_path / "huge.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ModelError, match="MAX_DETECTOR_INPUT_SIDE"):
        read_detector_graph(path)
    frames = tmp_path / "frames"
    frames.mkdir()
    cv2.imwrite(str(frames / "000000.png"), np.full((32, 32, 3), 90, np.uint8))
    result = runner.invoke(
        app, ["run", str(frames), "--detector", str(path), "--no-video", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1, result.output
    assert "ceiling" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("option", [["--list-topics"], ["--out-bag", "x.mcap"], ["--image-topic", "/cam"]])
def test_ros_only_options_are_refused_for_a_live_source(tmp_path: Path, option: list[str]) -> None:
    """A live source refuses the ROS-log options as a video file does, before opening anything (issue 40,
    case 4)."""
    result = runner.invoke(app, ["run", "rtsp://127.0.0.1:9/none", *option, "--out", str(tmp_path / "o")])
    assert result.exit_code != 0, result.output
    assert option[0] in result.output and "not a live source" in result.output


def test_a_detector_of_nan_and_inf_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """Every output NaN or inf: not exit 0 with "0 boxes" and numpy warnings, but one line saying the detector
    never gave a finite box (issue 40, case 1)."""
    bad = np.full((2100, 5), np.nan, np.float32)  # every cell of the 320 x 320 grid (strides 8, 16, 32)
    bad[::3, 0] = np.inf
    model = ultralytics_model(tmp_path / "nan.onnx", bad)
    result = runner.invoke(
        app,
        [
            "run",
            str(frames(tmp_path / "img", 10)),
            "--detector",
            str(model),
            "--model",
            str(toy_model(tmp_path / "model")),
            "--no-video",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert result.exit_code == 1, result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "nan.onnx" in errors[0] and "finite" in errors[0], result.output
    assert "RuntimeWarning" not in result.output and "Traceback" not in result.output


# -- cli_pair_radius: pairedge run --pair-radius: far pairs skipped; a bad radius is one line.


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    frames = tmp_path / "frames"
    frames.mkdir()
    for k, image in enumerate(np.random.default_rng(0).integers(0, 255, (3, 240, 640, 3), dtype=np.uint8)):
        cv2.imwrite(str(frames / f"{k:06d}.png"), image)
    det = tmp_path / "det.txt"  # people 1 and 2 side by side, 3 far to the right
    det.write_text(
        "".join(
            f"{f},{i},{x},60,30,80,1,-1,-1,-1\n" for f in range(1, 4) for i, x in ((1, 20), (2, 60), (3, 560))
        )
    )
    return frames, det


def _scored_pairs(out: Path) -> int:
    """Pairs scored over the run (summary.json): 3 frames x the pairs each frame kept."""
    return int(json.loads((out / "summary.json").read_text())["pairs"])


def test_run_pair_radius(tmp_path: Path) -> None:
    frames, det = _inputs(tmp_path)
    base = ["run", str(frames), "--detections", str(det), "--no-video"]
    assert runner.invoke(app, [*base, "--out", str(tmp_path / "all")]).exit_code == 0
    res = runner.invoke(app, [*base, "--pair-radius", "2", "--out", str(tmp_path / "near")])
    assert res.exit_code == 0, res.output
    assert _scored_pairs(tmp_path / "all") == 3 * 3  # (1, 2), (1, 3), (2, 3) in every frame
    assert _scored_pairs(tmp_path / "near") == 3 * 1  # only (1, 2): 40 px apart, 80 px tall
    bad = runner.invoke(app, [*base, "--pair-radius", "0", "--out", str(tmp_path / "bad")])
    lines = bad.stderr.splitlines()
    assert bad.exit_code == 1 and len(lines) == 1 and "pair_radius" in lines[0]
