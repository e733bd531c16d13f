"""Layouts told apart from what real exports declare (tests/fixtures/detectors/signatures.json), and decoded
as each project's own post-processing reads them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import ModelError
from pairedge.runtime.detectors.layouts import (
    LAYOUTS,
    PREPROCESS,
    GraphFacts,
    Layout,
    decode,
    forced,
    grid_cells,
    identify,
    layout_from_record,
    layout_record,
)

SIGNATURES = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "detectors" / "signatures.json").read_text()
)
#: The layout each recorded export must be read as (its project's default output).
EXPECTED = {
    "yolox_tiny_raw": "yolox-raw",
    "yolox_tiny_decoded": "yolox",
    "yolox_tiny_raw_onnxsim08": "yolox-raw",
    "yolox_nano_decoded": "yolox",
    "yolox_nano_raw_shared": "yolox-raw",
    "yolov8_tiny": "ultralytics",
    "yolov8_tiny_nms": "ultralytics-nms",
    "yolo11_tiny": "ultralytics",
    "yolo26_tiny": "ultralytics",
    "yolo26_tiny_e2e": "ultralytics-nms",
    "ultralytics_rtdetr_tiny": "ultralytics-rtdetr",
    "yolov5_tiny": "yolov5",
    "rtdetr_tiny": "detr",
    "rtdetrv2_r18vd_full": "detr",
    "dfine_tiny": "detr",
    "dfine_n_full": "detr",
}


def facts_of(entry: dict, metadata: bool = True) -> GraphFacts:
    """The facts :func:`identify` reads, as the export declares them (symbolic dimensions stay names)."""
    image = next(i for i in entry["inputs"] if i["name"] != "orig_target_sizes")
    outputs = tuple((o["name"], tuple(o["shape"])) for o in entry["outputs"])
    return GraphFacts(
        name=str(entry.get("file") or "export.onnx"),
        outputs=outputs,
        metadata=entry["metadata_props"] if metadata else {},
        op_types=frozenset(entry["op_type_counts"]),
        input_size=tuple(image["shape"][2:4]),
        size_input=any(i["name"] == "orig_target_sizes" for i in entry["inputs"]),
    )


def test_every_recorded_export_is_expected() -> None:
    assert set(SIGNATURES["exports"]) == set(EXPECTED)
    assert set(EXPECTED.values()) == set(LAYOUTS)  # every layout is a real export's


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_exports_are_told_apart(name: str) -> None:
    layout = identify(facts_of(SIGNATURES["exports"][name]))
    assert layout.kind == EXPECTED[name], layout.reason
    assert layout.reason


@pytest.mark.parametrize(
    "name", ["yolov8_tiny", "yolo11_tiny", "yolov5_tiny", "yolox_tiny_raw", "yolox_tiny_decoded"]
)
def test_without_metadata_the_candidate_count_decides(name: str) -> None:
    """onnx-simplifier, graph surgery or a converter can drop metadata_props: the grids still tell."""
    layout = identify(facts_of(SIGNATURES["exports"][name], metadata=False))
    assert layout.kind == EXPECTED[name]


@pytest.mark.parametrize("name", ["yolov8_tiny_nms", "yolo26_tiny_e2e", "ultralytics_rtdetr_tiny"])
def test_nms_outputs_without_metadata_are_refused_with_the_override(name: str) -> None:
    with pytest.raises(ModelError, match="--detector-layout") as info:
        identify(facts_of(SIGNATURES["exports"][name], metadata=False))
    assert "\n" not in str(info.value)


def test_quantized_and_fp16_graphs_keep_their_layout() -> None:
    decoded = SIGNATURES["exports"]["yolox_tiny_decoded"]
    quantized = facts_of(decoded)
    quantized = GraphFacts(
        quantized.name,
        quantized.outputs,
        {},
        quantized.op_types | {"ConvInteger", "DynamicQuantizeLinear"},
        quantized.input_size,
    )
    assert identify(quantized).kind == "yolox"
    raw = facts_of(SIGNATURES["exports"]["yolox_tiny_raw"])
    qdq = GraphFacts(
        raw.name, raw.outputs, {}, raw.op_types | {"QuantizeLinear", "DequantizeLinear"}, raw.input_size
    )
    assert identify(qdq).kind == "yolox-raw"


@pytest.mark.parametrize(
    ("outputs", "size", "needle"),
    [
        ((("out", (1, 84)),), (640, 640), "unknown detector layout"),
        ((("a", (1, 5, 9)), ("b", (1, 5, 9))), (640, 640), "unknown detector layout"),
        ((("output", (1, 1000, 85)),), (640, 640), "cannot tell"),  # no grid has 1000 cells
        ((("output", (1, 3549, 85)),), (417, 416), "cannot tell"),  # not a multiple of the strides
        ((("output", (1, 3549, 4)),), (416, 416), "cannot tell"),
    ],
)
def test_unknown_layouts_are_one_line(outputs, size, needle) -> None:
    with pytest.raises(ModelError, match=needle) as info:
        identify(GraphFacts("bad.onnx", outputs, {}, frozenset({"Conv"}), size))
    assert "\n" not in str(info.value) and "--detector-layout" in str(info.value)


def test_forced_layouts() -> None:
    facts = facts_of(SIGNATURES["exports"]["yolox_tiny_raw"])
    assert (
        forced("yolox", facts).kind == "yolox"
        and forced("yolox", facts).reason == "forced by --detector-layout"
    )
    with pytest.raises(ModelError, match="unknown layout"):
        forced("yolo9000", facts)
    with pytest.raises(ModelError, match="boxes, scores and labels"):
        forced("detr", facts)
    assert forced("detr", facts_of(SIGNATURES["exports"]["rtdetr_tiny"])).box_format == "xyxy"


def test_record_round_trip() -> None:
    for kind in LAYOUTS:
        layout = Layout(kind, ("a", "b", "c") if kind == "detr" else ("output0",), reason="why")
        record = layout_record(layout)
        assert layout_from_record(record) == layout
        assert record["resize"] == PREPROCESS[kind].resize and json.loads(json.dumps(record)) == record


# -- decoding, against each project's own post-processing formula (tests/fixtures/detectors/README.md)
# --------
def yolox_demo_postprocess(raw: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """YOLOX ``demo_postprocess`` (demo_utils.py), written from its formula: cx cy w h in input pixels."""
    out = raw.copy()
    grids, strides = [], []
    for s in (8, 16, 32):
        hs, ws = size[0] // s, size[1] // s
        xv, yv = np.meshgrid(np.arange(ws), np.arange(hs))
        grids.append(np.stack((xv, yv), 2).reshape(-1, 2))
        strides.append(np.full((hs * ws, 1), s))
    grid, stride = np.concatenate(grids), np.concatenate(strides)
    out[:, :2] = (out[:, :2] + grid) * stride
    out[:, 2:4] = np.exp(out[:, 2:4]) * stride
    return out


def xyxy(cxcywh: np.ndarray) -> np.ndarray:
    return np.concatenate([cxcywh[:, :2] - cxcywh[:, 2:4] / 2, cxcywh[:, :2] + cxcywh[:, 2:4] / 2], axis=1)


def test_yolox_raw_is_decoded_on_its_grids() -> None:
    size = (64, 96)
    n = grid_cells(size)
    assert n == 8 * 12 + 4 * 6 + 2 * 3
    rng = np.random.default_rng(0)
    raw = np.concatenate(
        [rng.uniform(-0.5, 1.5, (n, 2)), rng.uniform(-1, 1, (n, 2)), rng.uniform(0, 1, (n, 3))], 1
    )
    boxes, scores, classes = decode(
        Layout("yolox-raw", ("output",)), [raw[None].astype(np.float32)], size, "x"
    )
    ref = yolox_demo_postprocess(raw, size)
    np.testing.assert_allclose(boxes, xyxy(ref[:, :4]), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(scores, ref[:, 4] * ref[:, 5:].max(1), rtol=1e-6)
    np.testing.assert_array_equal(classes, ref[:, 5:].argmax(1))
    with pytest.raises(ModelError, match="candidates"):
        decode(Layout("yolox-raw", ("output",)), [raw[None, :-1].astype(np.float32)], size, "x")


def test_ultralytics_and_yolov5_rows() -> None:
    rows = np.array([[50, 60, 20, 40, 0.1, 0.9], [10, 10, 4, 4, 0.7, 0.2]], np.float32)
    boxes, scores, classes = decode(Layout("ultralytics", ("output0",)), [rows.T[None]], (640, 640), "x")
    np.testing.assert_allclose(boxes[0], [40, 40, 60, 80])
    np.testing.assert_allclose(scores, [0.9, 0.7]) and np.testing.assert_array_equal(classes, [1, 0])
    v5 = np.array([[50, 60, 20, 40, 0.5, 0.2, 0.8]], np.float32)  # objectness 0.5 x class 0.8
    boxes, scores, classes = decode(Layout("yolov5", ("output0",)), [v5[None]], (640, 640), "x")
    np.testing.assert_allclose(scores, [0.4]) and np.testing.assert_array_equal(classes, [1])


def test_end_to_end_rows() -> None:
    nms = np.array([[10, 20, 30, 60, 0.9, 0], [0, 0, 0, 0, 0, 0]], np.float32)
    boxes, scores, classes = decode(Layout("ultralytics-nms", ("output0",)), [nms[None]], (640, 640), "x")
    np.testing.assert_allclose(boxes[0], [10, 20, 30, 60]) and np.testing.assert_array_equal(classes, [0, 0])
    rt = np.array([[0.5, 0.25, 0.1, 0.2, 0.8, 3]], np.float32)  # cx cy w h normalised, score, class
    boxes, scores, classes = decode(Layout("ultralytics-rtdetr", ("output0",)), [rt[None]], (400, 800), "x")
    np.testing.assert_allclose(boxes[0], [360, 60, 440, 140], atol=1e-4)
    assert scores[0] == pytest.approx(0.8) and classes[0] == 3
    nan = np.array([[1, 2, 3, 4, 0.5, np.nan]], np.float32)
    assert decode(Layout("ultralytics-nms", ("o",)), [nan[None]], (64, 64), "x")[2][0] == -1


def test_detr_with_and_without_size_input() -> None:
    b = np.array([[[0.1, 0.2, 0.3, 0.4]]], np.float32)
    layout = Layout("detr", ("boxes", "scores", "labels"), "xyxy")
    boxes, _, _ = decode(layout, [b * 640, np.array([[0.9]]), np.array([[0]])], (640, 640), "x")
    np.testing.assert_allclose(boxes[0], [64, 128, 192, 256], rtol=1e-6)
    boxes, _, _ = decode(
        Layout("detr", layout.outputs), [b, np.array([[0.9]]), np.array([[0]])], (100, 200), "x"
    )
    np.testing.assert_allclose(boxes[0], [20, 20, 60, 40], rtol=1e-6)  # normalised: every value in [0, 1]
    with pytest.raises(ModelError, match="expected DETR outputs"):
        decode(layout, [b, np.zeros((1, 2)), np.zeros((1, 1))], (64, 64), "x")
