"""Real exports: ONNX Runtime-quantized copies of the bundled detector (made here), and, when
``PAIREDGE_DETECTOR_EXPORTS`` names a folder holding them, the exports recorded in
tests/fixtures/detectors/signatures.json (made by each project's own export code, not committed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from pairedge.measure.sim import Scene, get_preset
from pairedge.runtime.detectors import open_detector
from pairedge.runtime.detectors.bundled import bundled_detector
from pairedge.runtime.detectors.graph import read_detector_graph
from test_layouts import EXPECTED

FIXTURES = Path(__file__).parents[2] / "fixtures" / "detectors"
EXPORTS = os.environ.get("PAIREDGE_DETECTOR_EXPORTS")


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    return next(iter(Scene(get_preset("static", 1000), 1000).frames(1))).image


def test_dynamically_quantized_detector_keeps_its_layout(tmp_path, image) -> None:
    """ONNX Runtime's dynamic quantization (ConvInteger): the same layout, decoded without error. (Its
    accuracy is another matter: dynamic uint8 quantization of YOLOX-Nano's 0-255 input scores every person
    near 0.)"""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    q = tmp_path / "yolox_nano.int8.onnx"
    quantize_dynamic(str(bundled_detector().path()), str(q), weight_type=QuantType.QUInt8)
    graph = read_detector_graph(q)
    assert "ConvInteger" in graph.op_types and graph.quantized
    with open_detector(q) as det:
        assert det.layout.kind == "yolox-raw" and "quantized" in det.describe()
        det.detect(image)
        assert det.last_check.candidates == 3549 and det.last_check.nonfinite == 0


def test_qdq_quantized_detector_keeps_its_layout(tmp_path, image) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    blob = np.full((1, 3, 416, 416), 114, np.float32)

    class One(CalibrationDataReader):
        def __init__(self) -> None:
            self.done = False

        def get_next(self):
            if self.done:
                return None
            self.done = True
            return {"images": blob}

    q = tmp_path / "yolox_nano.qdq.onnx"
    quantize_static(str(bundled_detector().path()), str(q), One(), quant_format=QuantFormat.QDQ)
    assert read_detector_graph(q).has_qdq
    with open_detector(q) as det:
        assert det.layout.kind == "yolox-raw"
        det.detect(image)


def _recorded() -> list[tuple[str, str]]:
    sigs = json.loads((FIXTURES / "signatures.json").read_text())["exports"]
    return [(name, e["file"]) for name, e in sorted(sigs.items()) if e.get("file")]


@pytest.mark.skipif(
    not EXPORTS, reason="PAIREDGE_DETECTOR_EXPORTS is not set (the real exports are not committed)"
)
@pytest.mark.parametrize(("name", "file"), _recorded())
def test_recorded_exports_are_read_as_their_project_writes_them(name: str, file: str, image) -> None:
    path = Path(str(EXPORTS)) / file
    if not path.is_file():
        pytest.skip(f"{path} not there")
    with open_detector(path) as det:
        assert det.layout.kind == EXPECTED[name]
        det.detect(image)  # random weights: the boxes mean nothing, the shapes must decode


@pytest.mark.skipif(
    not EXPORTS, reason="PAIREDGE_DETECTOR_EXPORTS is not set (the real exports are not committed)"
)
def test_raw_and_decoded_yolox_exports_agree(image) -> None:
    raw, decoded = Path(str(EXPORTS)) / "yolox_tiny_raw.onnx", Path(str(EXPORTS)) / "yolox_tiny_decoded.onnx"
    if not (raw.is_file() and decoded.is_file()):
        pytest.skip("the YOLOX pair is not there")
    from pairedge.runtime.detectors.onnx import OnnxDetectorOptions

    options = OnnxDetectorOptions(score_threshold=0.0, max_detections=50)  # random weights: keep some boxes
    with open_detector(raw, options=options) as a, open_detector(decoded, options=options) as b:
        ra, rb = a.detect(image), b.detect(image)
    assert len(ra) == len(rb) > 0
    np.testing.assert_allclose(ra.boxes, rb.boxes, atol=0.5)
