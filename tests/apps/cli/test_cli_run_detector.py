"""``pairedge run`` without a detection file: an ONNX --detector built to emit known boxes, the bundled
YOLOX-Nano by default, HOG on request, and the guard that stops a detector whose output is implausible."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from detector_models import detr_model, raw_model, ultralytics_model
from pairedge.apps.cli import app
from pairedge.runtime.detectors.hog import HogDetector
from run_demo_helpers import toy_model
from typer.testing import CliRunner

runner = CliRunner()
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
    from pairedge.core.sim import Scene, get_preset

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
