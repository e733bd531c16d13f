"""The ONNX Runtime detector on graphs built to emit known boxes in each accepted layout (shapes and metadata
as the real exports declare them), and its one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
from detector_models import detr_model, raw_model, ultralytics_model, yolox_model
from pairedge.core.errors import FormatError, InputError, ModelError
from pairedge.runtime.detectors import DetectorOptions, open_detector
from pairedge.runtime.detectors.onnx import OnnxDetectorOptions
from pairedge.runtime.detectors.postprocess import select
from pairedge.runtime.detectors.preprocess import letterbox

FRAME = np.full((480, 640, 3), 40, np.uint8)  # H 480, W 640 -> 320 x 320 input: scale 0.5, pad_y 40 (centred)
#: Frame-pixel x1 y1 x2 y2 of two people, a duplicate of the first (suppressed by NMS), a car, a weak box.
PEOPLE = np.array([[100, 100, 200, 300], [300, 50, 360, 200]], np.float32)
DUPLICATE = np.array([104, 104, 204, 304], np.float32)
CAR = np.array([400, 300, 500, 400], np.float32)
WEAK = np.array([500, 100, 560, 200], np.float32)


def to_network(xyxy: np.ndarray, pad_y: float) -> np.ndarray:
    return xyxy * 0.5 + np.array([0, pad_y, 0, pad_y], np.float32)


def to_stretched(xyxy: np.ndarray) -> np.ndarray:
    """Frame pixels -> the 320 x 320 input of a plain resize (RT-DETR / D-FINE deploy scripts)."""
    return xyxy * np.array([0.5, 320 / 480, 0.5, 320 / 480], np.float32)


def cxcywh(xyxy: np.ndarray) -> np.ndarray:
    return np.concatenate([(xyxy[:, :2] + xyxy[:, 2:]) / 2, xyxy[:, 2:] - xyxy[:, :2]], axis=1)


def expected_xywh() -> np.ndarray:
    return np.concatenate([PEOPLE[:, :2], PEOPLE[:, 2:] - PEOPLE[:, :2]], axis=1)


def frame_boxes() -> np.ndarray:
    return np.stack([PEOPLE[0], PEOPLE[1], DUPLICATE, CAR, WEAK])


def test_letterbox_round_trip() -> None:
    padded, box = letterbox(FRAME, (320, 320), "letterbox-center")
    assert padded.shape == (320, 320, 3) and (box.pad_x, box.pad_y) == (0, 40)
    assert padded[0, 0, 0] == 114 and padded[200, 100, 0] == 40
    np.testing.assert_allclose(box.undo(to_network(PEOPLE, 40)), PEOPLE, atol=1e-4)


def test_ultralytics_layout_returns_the_encoded_people(tmp_path) -> None:
    net = cxcywh(to_network(frame_boxes(), 40))
    scores = np.array([[0.9, 0.0], [0.8, 0.1], [0.7, 0.0], [0.1, 0.95], [0.1, 0.0]], np.float32)
    path = ultralytics_model(tmp_path / "yolo.onnx", np.concatenate([net, scores], axis=1))
    with open_detector(path) as det:
        assert det.layout.kind == "ultralytics"
        found = det.detect(FRAME)
    np.testing.assert_allclose(found.boxes, expected_xywh(), atol=1e-3)
    np.testing.assert_allclose(found.scores, [0.9, 0.8], atol=1e-6)
    assert (found.track_ids == -1).all()


def test_ultralytics_every_class_and_cap(tmp_path) -> None:
    net = cxcywh(to_network(frame_boxes(), 40))
    scores = np.array([[0.9, 0.0], [0.8, 0.1], [0.7, 0.0], [0.1, 0.95], [0.1, 0.0]], np.float32)
    path = ultralytics_model(tmp_path / "yolo.onnx", np.concatenate([net, scores], axis=1), metadata=False)
    with open_detector(path, options=OnnxDetectorOptions(person_class=None, max_detections=2)) as det:
        found = det.detect(FRAME)
    np.testing.assert_allclose(found.scores, [0.95, 0.9], atol=1e-6)  # the car is kept, the cap cuts at 2


def test_yolox_layout_top_left_letterbox(tmp_path) -> None:
    net = cxcywh(to_network(frame_boxes(), 0))  # YOLOX pads at the bottom-right: no offset
    obj = np.array([[0.95], [0.9], [0.8], [0.9], [0.2]], np.float32)
    cls = np.array([[0.9, 0.0], [0.9, 0.1], [0.9, 0.0], [0.1, 0.99], [0.5, 0.0]], np.float32)
    rows = np.concatenate([net, obj, cls], axis=1)
    path = yolox_model(tmp_path / "yolox.onnx", rows)
    with open_detector(path) as det:
        assert det.layout.kind == "yolox"
        found = det.detect(FRAME)
    np.testing.assert_allclose(found.boxes, expected_xywh(), atol=1e-3)
    np.testing.assert_allclose(found.scores, [0.95 * 0.9, 0.9 * 0.9], atol=1e-6)


def test_yolox_raw_and_forced_layout(tmp_path) -> None:
    """A raw export (no Exp) is grid-decoded; forcing it to be read as decoded turns offsets into corner
    phantoms, and the detector says that the layout was forced."""
    rows = np.zeros((1, 7), np.float32)
    rows[0] = [
        0.5,
        0.5,
        np.log(2.0),
        np.log(4.0),
        0.9,
        0.9,
        0.0,
    ]  # cell (0, 0) of stride 8: centre (4, 4), 16 x 32
    path = yolox_model(tmp_path / "raw.onnx", rows, decoded=False)
    with open_detector(path) as det:
        assert det.layout.kind == "yolox-raw"
        found = det.detect(FRAME)  # frame 640 x 480 -> scale 0.5 at the top-left
    np.testing.assert_allclose(
        found.boxes, [[0, 0, 24, 40]], atol=1e-3
    )  # x1 y1 -4 -12 (net px): clipped at 0
    with open_detector(path, options=OnnxDetectorOptions(layout="yolox")) as det:
        assert det.layout.kind == "yolox" and "forced" in det.layout_note()
        assert det.detect(FRAME).boxes[:, 2:].max() < 5  # a box a pixel or two wide: a phantom


def test_detr_layout_with_rtdetr_size_input(tmp_path) -> None:
    boxes = to_stretched(frame_boxes())
    path = detr_model(
        tmp_path / "rtdetr.onnx", boxes, np.array([0.9, 0.8, 0.7, 0.95, 0.05]), np.array([0, 0, 0, 2, 0])
    )
    with open_detector(path) as det:
        assert det.layout.kind == "detr"
        found = det.detect(FRAME)
    np.testing.assert_allclose(found.boxes, expected_xywh(), atol=1e-3)


@pytest.mark.parametrize("fmt", [None, "cxcywh-normalized"])
def test_detr_layout_normalised_boxes(tmp_path, fmt) -> None:
    boxes = to_stretched(frame_boxes()) / 320
    if fmt == "cxcywh-normalized":
        boxes = cxcywh(boxes)
    path = detr_model(
        tmp_path / "detr.onnx",
        boxes,
        np.array([0.9, 0.8, 0.7, 0.95, 0.05]),
        np.array([0, 0, 0, 2, 0]),
        size_input=False,
        metadata={"box_format": fmt} if fmt else None,
    )
    with open_detector(path) as det:
        found = det.detect(FRAME)
    np.testing.assert_allclose(found.boxes, expected_xywh(), atol=1e-3)


@pytest.mark.parametrize(
    ("outputs", "needle"),
    [
        ({"out": np.zeros((1, 84))}, "unknown detector layout"),
        ({"a": np.zeros((1, 5, 9)), "b": np.zeros((1, 5, 9))}, "unknown detector layout"),
        ({"output": np.zeros((1, 9, 4))}, "cannot tell the detector layout"),
        ({"out": np.zeros((2, 3, 7, 7))}, "unknown detector layout"),
    ],
)
def test_bad_layouts_are_one_line(tmp_path, outputs, needle) -> None:
    path = raw_model(tmp_path / "bad.onnx", outputs)
    with pytest.raises(ModelError, match=needle) as info:
        open_detector(path).activate()
    assert "\n" not in str(info.value)


def test_bad_files_are_one_line(tmp_path) -> None:
    with pytest.raises(FormatError, match="no such detector model"):
        open_detector(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="could not load the detector") as info:
        open_detector(tmp_path / "junk.onnx").activate()
    assert "\n" not in str(info.value)
    (tmp_path / "x.pt").write_bytes(b"x")
    with pytest.raises(FormatError, match="expected an .onnx"):
        open_detector(tmp_path / "x.pt")


def test_wrong_image_and_inactive(tmp_path) -> None:
    net = cxcywh(to_network(PEOPLE, 40))
    path = ultralytics_model(tmp_path / "y.onnx", np.concatenate([net, np.ones((2, 2), np.float32)], axis=1))
    det = open_detector(path)
    with pytest.raises(Exception, match="not active"):
        det.detect(FRAME)
    with det, pytest.raises(InputError, match=r"\(H, W, 3\) uint8"):
        det.detect(FRAME.astype(np.float32))


def test_options_are_checked() -> None:
    with pytest.raises(InputError, match="max_detections"):
        DetectorOptions(max_detections=0)
    with pytest.raises(InputError, match="nms_iou"):
        DetectorOptions(nms_iou=0.0)
    from pairedge.runtime.detectors.hog import HogDetector

    with pytest.raises(InputError, match="expected options of type HogOptions"):
        HogDetector.check_options(DetectorOptions())


def test_select_suppresses_and_orders() -> None:
    xyxy = np.stack([PEOPLE[0], DUPLICATE, PEOPLE[1]])
    keep = select(xyxy, np.array([0.5, 0.9, 0.6], np.float32), None, DetectorOptions())
    assert keep.tolist() == [1, 2]  # the duplicate outscores the first box, which it suppresses


def test_a_detector_that_fails_inside_onnx_runtime_is_one_line_without_its_log(tmp_path) -> None:
    """ONNX Runtime logs every error it raises ("[E:onnxruntime:...]") on the C++ stderr before raising:
    pairedge's sessions silence that log (``ort_session.LOG_SEVERITY``), so a run prints only its own line."""
    import os
    import subprocess
    import sys

    import cv2
    import onnx
    from onnx import TensorProto, helper

    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 5, 7])
    shape = helper.make_tensor(
        "shape", TensorProto.INT64, [3], [1, 5, 7]
    )  # 12,288 values into 35: fails at run
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["images", "shape"], ["output"], name="r")], "g", [image], [out], [shape]
    )
    model = tmp_path / "broken.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    frames = tmp_path / "frames"
    frames.mkdir()
    for k in range(2):
        cv2.imwrite(str(frames / f"{k:06d}.png"), FRAME)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairedge.apps.cli",
            "run",
            str(frames),
            "--detector",
            str(model),
            "--no-video",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[E:onnxruntime" not in proc.stderr and "[W:onnxruntime" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "broken.onnx" in errors[0], proc.stderr
