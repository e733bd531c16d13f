"""``pairedge build --detector`` over the recording fake TensorRT, and the native TensorRT detector running
the engine through the fake (which executes the ONNX with ONNX Runtime on the fake device buffers):
constructed YOLOv8 and DETR / RT-DETR graphs return exactly the encoded boxes after NMS, as on ONNX
Runtime."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from detector_models import detr_model, ultralytics_model, yolox_model
from fake_tensorrt import FakeCudaMemory, make_fake_tensorrt, plan_of, readback_calls
from pairedge.core.errors import FormatError, InputError, ModelError
from pairedge.export.tensorrt.builder import BuildError, BuildSettings
from pairedge.export.tensorrt.detector import build_detector
from pairedge.runtime.backends.tensorrt_loader import EngineFileError, EngineManifest, EngineMismatchError
from pairedge.runtime.detectors import open_detector
from pairedge.runtime.detectors.engine_manifest import DetectorEngineManifest
from pairedge.runtime.detectors.onnx import OnnxDetectorOptions
from pairedge.runtime.detectors.tensorrt import TensorRTDetector, TensorRTDetectorOptions

FRAME = np.full((480, 640, 3), 40, np.uint8)  # -> 320 x 320 input: scale 0.5, 40 rows of padding above
PEOPLE = np.array([[100, 100, 200, 300], [300, 50, 360, 200]], np.float32)
#: people, a duplicate of the first (NMS drops it), a car (class 1), a weak box (below the threshold)
BOXES = np.stack(
    [PEOPLE[0], PEOPLE[1], [104, 104, 204, 304], [400, 300, 500, 400], [500, 100, 560, 200]]
).astype(np.float32)
EXPECTED = np.concatenate([PEOPLE[:, :2], PEOPLE[:, 2:] - PEOPLE[:, :2]], axis=1)
VERSION = "10.3.0.30"


@pytest.fixture()
def available(monkeypatch: pytest.MonkeyPatch) -> None:
    """open_detector asks whether TensorRT and cuda-python are installed: here the fakes stand in for both."""
    monkeypatch.setattr(TensorRTDetector, "unavailable_reason", classmethod(lambda cls: None))


def _net(xyxy: np.ndarray, pad_y: float) -> np.ndarray:
    return xyxy * 0.5 + np.array([0, pad_y, 0, pad_y], np.float32)


def _cxcywh(xyxy: np.ndarray) -> np.ndarray:
    return np.concatenate([(xyxy[:, :2] + xyxy[:, 2:]) / 2, xyxy[:, 2:] - xyxy[:, :2]], axis=1)


def yolo(tmp_path: Path, image_shape=None) -> Path:
    scores = np.array([[0.9, 0.0], [0.8, 0.1], [0.7, 0.0], [0.1, 0.95], [0.1, 0.0]], np.float32)
    rows = np.concatenate([_cxcywh(_net(BOXES, 40)), scores], axis=1)
    if image_shape is None:
        return ultralytics_model(tmp_path / "yolo.onnx", rows)
    from detector_models import _graph_outputs, pad_to_grid, save

    out = np.ascontiguousarray(
        pad_to_grid(rows, (320, 320)).T[None]
    )  # no metadata: one candidate per grid cell
    return save(_graph_outputs({"output0": out}, (320, 320), image_shape=image_shape), tmp_path / "yolo.onnx")


def _stretched(xyxy: np.ndarray) -> np.ndarray:
    """Frame pixels -> the 320 x 320 input of RT-DETR's plain resize."""
    return xyxy * np.array([0.5, 320 / 480, 0.5, 320 / 480], np.float32)


def rtdetr(tmp_path: Path, size_input: bool = True) -> Path:
    boxes = _stretched(BOXES) if size_input else _stretched(BOXES) / 320
    return detr_model(
        tmp_path / "rtdetr.onnx",
        boxes,
        np.array([0.9, 0.8, 0.7, 0.95, 0.05]),
        np.array([0, 0, 0, 2, 0]),
        size_input=size_input,
    )


def _build(onnx: Path, precision: str = "fp32", version: str = VERSION, **settings) -> tuple:
    trt = make_fake_tensorrt(version, dla_cores=2)
    return build_detector(onnx, BuildSettings(precision, **settings), trt=trt, memory=FakeCudaMemory()), trt


def _detector(engine: Path, version: str = VERSION, options=None) -> TensorRTDetector:
    memory = FakeCudaMemory()
    trt = make_fake_tensorrt(version, memory=memory, dla_cores=2)
    det = TensorRTDetector(engine, options, trt=trt, memory=memory)
    det.trt_calls, det.fake_memory = trt.calls, memory  # type: ignore[attr-defined]
    return det


def test_build_call_sequence_profile_is_the_fixed_input(tmp_path: Path) -> None:
    onnx = rtdetr(tmp_path)
    built, trt = _build(onnx, "fp16")
    shape, sizes = (1, 3, 320, 320), (1, 2)
    assert trt.calls == [
        ("ILogger.__init__",),
        ("Builder.__init__", True),
        ("Builder.create_network", 0),
        ("OnnxParser.__init__", "INetworkDefinition", True),
        ("OnnxParser.parse_from_file", str(onnx)),
        ("INetworkDefinition.get_input", 0),
        ("INetworkDefinition.get_input", 1),
        *[("INetworkDefinition.get_output", i) for i in range(3)],
        ("Builder.create_builder_config",),
        ("IBuilderConfig.set_memory_pool_limit", "WORKSPACE", 256 << 20),
        ("IBuilderConfig.set_flag", "FP16"),
        ("Builder.create_optimization_profile",),
        ("IOptimizationProfile.set_shape", "images", shape, shape, shape),
        ("IOptimizationProfile.set_shape", "orig_target_sizes", sizes, sizes, sizes),
        ("IBuilderConfig.add_optimization_profile",),
        ("IBuilderConfig.create_timing_cache", 0),
        ("IBuilderConfig.set_timing_cache", False),
        ("IBuilderConfig.profiling_verbosity=", "DETAILED"),
        ("Builder.build_serialized_network",),
        *readback_calls({"images": shape, "orig_target_sizes": sizes}),
    ]
    assert built.engine == tmp_path / "engines" / "orin-sm87-trt10.3.0" / "rtdetr.fp16.engine"
    m = DetectorEngineManifest.read(built.engine)
    assert m == built.manifest and m.kind == "detector" and m.layout["kind"] == "detr"
    assert (m.image_input, m.size_input, m.input_size) == ("images", "orig_target_sizes", (320, 320))
    assert dict(m.inputs) == {"images": [1, 3, 320, 320], "orig_target_sizes": [1, 2]}
    assert m.build["builder_flags"] == ["FP16"] and m.dla_core is None
    assert plan_of(built.engine)["shapes"]["images"] == [list(shape)] * 3


@pytest.mark.parametrize("image_shape", [None, ["batch", 3, 320, 320]])
def test_yolov8_engine_returns_the_encoded_people(tmp_path: Path, image_shape) -> None:
    onnx = yolo(tmp_path, image_shape)
    built, _ = _build(onnx)
    with _detector(built.engine) as det:
        assert det.layout.kind == "ultralytics" and det.input_size == (320, 320)
        found = det.detect(FRAME)
        calls, memory = det.trt_calls, det.fake_memory
    np.testing.assert_allclose(found.boxes, EXPECTED, atol=1e-3)
    np.testing.assert_allclose(found.scores, [0.9, 0.8], atol=1e-6)
    assert (found.track_ids == -1).all()
    with open_detector(onnx) as ort:  # the ONNX Runtime detector on the same graph: the very same boxes
        reference = ort.detect(FRAME)
    np.testing.assert_array_equal(found.boxes, reference.boxes)
    np.testing.assert_array_equal(found.scores, reference.scores)
    assert ("IExecutionContext.set_input_shape", "images", (1, 3, 320, 320)) in calls
    assert sum(c[0] == "IExecutionContext.execute_async_v3" for c in calls) == 1
    assert ("alloc_pinned", (1, 3, 320, 320), "float32") in memory.ops and memory.closed


@pytest.mark.parametrize("size_input", [True, False])
def test_detr_engine_returns_the_encoded_people(tmp_path: Path, size_input: bool) -> None:
    built, _ = _build(rtdetr(tmp_path, size_input), "fp16")
    with _detector(built.engine) as det:
        assert det.layout.kind == "detr"
        found = det.detect(FRAME)
        ops = det.fake_memory.ops
    np.testing.assert_allclose(found.boxes, EXPECTED, atol=1e-3)
    np.testing.assert_allclose(found.scores, [0.9, 0.8], atol=1e-6)
    assert ("alloc_pinned", (1, 5), "int64") in ops  # labels come back as int64
    assert (("alloc_pinned", (1, 2), "int64") in ops) == size_input


def test_yolox_engine_and_the_run_path_options(tmp_path: Path, available: None) -> None:
    obj = np.array([[0.95], [0.9], [0.8], [0.9], [0.2]], np.float32)
    cls = np.array([[0.9, 0.0], [0.9, 0.1], [0.9, 0.0], [0.1, 0.99], [0.5, 0.0]], np.float32)
    rows = np.concatenate(
        [np.concatenate([_cxcywh(_net(BOXES, 0)), obj, cls], axis=1), np.zeros((8, 7), np.float32)]
    )
    built, _ = _build(yolox_model(tmp_path / "yolox.onnx", rows))
    # pairedge run's path: ONNX detector options, backend "onnxruntime" -> the native detector by suffix
    memory = FakeCudaMemory()
    trt = make_fake_tensorrt(VERSION, memory=memory)
    det = open_detector(built.engine, "onnxruntime", OnnxDetectorOptions(max_detections=1))
    assert isinstance(det, TensorRTDetector) and det.options.max_detections == 1
    det._trt, det._injected_memory = trt, memory
    with det:
        found = det.detect(FRAME)
        assert "TensorRT detector yolox.fp32.engine (yolox, input 320x320, fp32, the GPU)" in det.describe()
    np.testing.assert_allclose(found.boxes, EXPECTED[:1], atol=1e-3)


def test_dla_detector_engine(tmp_path: Path) -> None:
    built, trt = _build(yolo(tmp_path), "fp16", dla_core=1, gpu_fallback=True)
    assert built.engine.parent.name == "orin-sm87-trt10.3.0-dla1"
    assert ("IBuilderConfig.DLA_core=", 1) in trt.calls and built.manifest.gpu_fallback
    with _detector(built.engine) as det:  # dla_core "recorded": the manifest's core
        np.testing.assert_allclose(det.detect(FRAME).boxes, EXPECTED, atol=1e-3)
        names = [c[0] for c in det.trt_calls]
    assert names.index("Runtime.DLA_core=") < names.index("Runtime.deserialize_cuda_engine")
    with pytest.raises(
        EngineMismatchError,
        match=r"built for DLA core 1, requested for the GPU.*--detector \S+yolo.onnx"
        r" --precision fp16$",
    ):
        _detector(built.engine, options=TensorRTDetectorOptions(dla_core=None)).activate()


def test_engine_of_another_tensorrt_is_refused(tmp_path: Path) -> None:
    built, _ = _build(yolo(tmp_path))
    det = _detector(built.engine, version="10.13.0.35")
    with pytest.raises(
        EngineMismatchError, match="TensorRT 10.3.0.30 built it, this machine runs 10.13.0.35"
    ):
        det.activate()
    assert not [c for c in det.trt_calls if c[0] == "Runtime.deserialize_cuda_engine"]


def test_precision_refusals(tmp_path: Path) -> None:
    onnx = yolo(tmp_path)
    with pytest.raises(InputError, match="needs a detector ONNX with Q/DQ nodes"):
        _build(onnx, "int8")
    with pytest.raises(InputError, match="strongly typed .* this graph is fp32"):
        _build(onnx, "fp16", version="10.13.0.35")
    built, _ = _build(onnx, "fp32", version="10.13.0.35")
    assert built.manifest.build["network_flags"] == 2


def test_detector_graph_refusals(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="dynamic height or width"):
        _build(yolo(tmp_path, [1, 3, "h", "w"]))
    classifier = Path(__file__).resolve().parents[3] / "sdk" / "models" / "default" / "stage1.onnx"
    with pytest.raises(ModelError, match=r"expected one image input \[1, 3, H, W\]"):
        _build(classifier)
    trt = make_fake_tensorrt(VERSION, unsupported_ops=frozenset({"ReduceMean"}))
    with pytest.raises(BuildError, match="op ReduceMean"):
        build_detector(yolo(tmp_path), BuildSettings(), trt=trt, memory=FakeCudaMemory())


def test_engine_files_and_manifests_are_checked(tmp_path: Path, available: None) -> None:
    built, _ = _build(yolo(tmp_path))
    with pytest.raises(FormatError, match="no such detector engine"):
        open_detector(tmp_path / "missing.engine")
    with pytest.raises(InputError, match="build it with `pairedge build --detector"):
        open_detector(yolo(tmp_path), "tensorrt")
    with pytest.raises(InputError, match="runs on the tensorrt detector, not 'onnxruntime-cuda'"):
        open_detector(built.engine, "onnxruntime-cuda")
    with pytest.raises(EngineFileError, match="not a classifier stage"):
        EngineManifest.read(built.engine)
    path = built.engine.with_name(built.engine.name + ".json")
    data = json.loads(path.read_text())
    data["layout"]["kind"] = "ssd"
    path.write_text(json.dumps(data))
    with pytest.raises(EngineFileError, match="'layout': expected an object with kind"):
        _detector(built.engine).activate()
    del data["layout"]
    path.write_text(json.dumps(data))
    with pytest.raises(EngineFileError, match="lacks layout"):
        DetectorEngineManifest.read(built.engine)
    _build(yolo(tmp_path))  # a good engine and manifest again, then the engine truncated: never deserialised
    built.engine.write_bytes(built.engine.read_bytes()[:-3])
    det = _detector(built.engine)
    with pytest.raises(EngineFileError, match="engine file is truncated"):
        det.activate()
    assert not [c for c in det.trt_calls if c[0] == "Runtime.deserialize_cuda_engine"]


def test_cli_build_detector_and_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, available: None
) -> None:
    from pairedge.apps.cli import app
    from pairedge.runtime.backends import cudamem
    from typer.testing import CliRunner

    fake = make_fake_tensorrt(VERSION, memory=FakeCudaMemory())
    monkeypatch.setitem(sys.modules, "tensorrt", fake)
    monkeypatch.setattr(cudamem, "open_cuda_memory", lambda kind="auto", device=0: FakeCudaMemory())
    onnx = yolo(tmp_path)
    result = CliRunner().invoke(app, ["build", "--detector", str(onnx), "--precision", "fp16"])
    assert result.exit_code == 0, result.output
    engine = tmp_path / "engines" / "orin-sm87-trt10.3.0" / "yolo.fp16.engine"
    printed = " ".join(result.output.split())
    assert engine.is_file() and "ultralytics layout, input 320x320" in printed
    assert "run it with: pairedge run VIDEO --detector" in printed
    both = CliRunner().invoke(app, ["build", str(tmp_path), "--detector", str(onnx)])
    assert both.exit_code != 0 and "pass no MODEL_DIR" in both.output
    # pairedge run VIDEO --detector ENGINE: the fake executes the engine on the run's fake device memory
    import cv2

    video = tmp_path / "frames"
    video.mkdir()
    for i in range(3):
        cv2.imwrite(str(video / f"{i:04d}.png"), FRAME)
    memory = FakeCudaMemory()
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt(VERSION, memory=memory))
    monkeypatch.setattr(
        "pairedge.runtime.detectors.tensorrt.open_cuda_memory", lambda kind="auto", device=0: memory
    )
    out = tmp_path / "run"
    run = CliRunner().invoke(
        app, ["run", str(video), "--detector", str(engine), "--out", str(out), "--no-video"]
    )
    assert run.exit_code == 0, run.output
    printed = " ".join(run.output.split())
    assert (
        "people found by TensorRT detector yolo.fp16.engine (ultralytics, input 320x320, fp16, the GPU)"
        in printed
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == 3 and summary["people_per_frame"] == 2.0  # the two encoded people per frame
    assert sum(op[0] == "htod" for op in memory.ops) == 3  # one image copy per frame, on the run's device


def test_the_bundled_detector_builds_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pairedge build --detector yolox-nano --precision fp16``: its verified fp16 copy, engines under the
    current folder (never inside the package), the raw YOLOX layout in the manifest."""
    from pairedge.apps.cli.build import detector_source
    from pairedge.runtime.detectors.bundled import bundled_detector

    monkeypatch.chdir(tmp_path)
    onnx, root = detector_source("yolox-nano", "fp16")
    assert onnx == bundled_detector().path("fp16") and root == tmp_path
    trt = make_fake_tensorrt(VERSION, dla_cores=2)
    built = build_detector(onnx, BuildSettings("fp16"), root=root, trt=trt, memory=FakeCudaMemory())
    assert (
        built.engine.parent.parent == tmp_path / "engines" and built.engine.name == "yolox_nano.fp16.engine"
    )
    assert built.manifest.layout["kind"] == "yolox-raw" and built.manifest.input_size == (416, 416)
    assert detector_source("model.onnx", "fp16") == (Path("model.onnx"), None)
