"""ONNX person detectors on ONNX Runtime: CPU (default), CUDA and TensorRT execution providers.

The output layout (Ultralytics YOLOv8/11, YOLOX, DETR / RT-DETR) is found when the detector is activated
(:mod:`pairedge.runtime.detectors.layouts` lists what is accepted); frames are letterboxed to the network
input and the boxes mapped back and filtered in :mod:`pairedge.runtime.detectors.postprocess`. Session
settings are the classifier backends' :class:`~pairedge.runtime.backends.ort.OrtOptions` (threads,
optimisation level, GPU index, TensorRT fp16 and engine cache).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import BackendError, FormatError, InputError, ModelError
from pairedge.runtime.backends.ort import _LEVELS, OrtOptions, provider_unavailable
from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.layouts import LAYOUTS, Layout, decode, find_layout
from pairedge.runtime.detectors.postprocess import DetectorOptions, letterbox

#: The network input side used when the model's input is dynamic and its metadata names no ``imgsz``.
DEFAULT_INPUT = 640
_SIZE_INPUT = "orig_target_sizes"


@dataclass(frozen=True)
class OnnxDetectorOptions(DetectorOptions):
    """ONNX detector settings beside the shared ones.

    Attributes:
        ort: ONNX Runtime session options (those of the classifier backends).
        input_size: (height, width) fed to a model whose input is dynamic; None: its metadata ``imgsz``, else
            640 x 640. Ignored for a static input.
        layout: one of ``ultralytics``, ``yolox``, ``detr`` to override the detected layout; None: detect.
    """

    ort: OrtOptions = field(default_factory=OrtOptions)
    input_size: tuple[int, int] | None = None
    layout: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.ort, OrtOptions):
            raise InputError(f"ort: expected OrtOptions, got {type(self.ort).__name__}")
        size = self.input_size
        if size is not None and not (
            isinstance(size, tuple) and len(size) == 2 and all(isinstance(v, int) and 32 <= v <= 4096 for v in size)
        ):
            raise InputError(f"input_size: expected (height, width), integers in [32, 4096], got {size!r}")
        if self.layout is not None and self.layout not in LAYOUTS:
            raise InputError(f"layout: expected one of {', '.join(LAYOUTS)} or None, got {self.layout!r}")


def _ort() -> Any:
    import onnxruntime

    return onnxruntime


def check_model_path(path: str | Path) -> Path:
    """``path`` as a readable ``.onnx`` file within ``pairedge.core.limits.MAX_MODEL_BYTES``.

    Raises:
        FormatError: missing, not a file, not ``.onnx``, or too large.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise FormatError(p, "no such detector model file; expected an .onnx file (or 'hog' for the built-in one)")
    # a folder / FIFO / device, or over the ceiling: refused without opening it
    limits.regular_file(p, "an .onnx detector model file", limits.MAX_MODEL_BYTES)
    if p.suffix.lower() != ".onnx":
        raise FormatError(p, f"expected an .onnx detector model, got a {p.suffix or 'suffix-less'} file")
    return p


class OnnxDetector(Detector):
    """An exported person detector on ONNX Runtime's CPU provider.

    Args:
        model: the ``.onnx`` file.
        options: :class:`OnnxDetectorOptions`; None for the defaults.
    """

    name = "onnxruntime"
    options_type = OnnxDetectorOptions
    providers: ClassVar[tuple[str, ...]] = ("CPUExecutionProvider",)

    def __init__(self, model: str | Path, options: OnnxDetectorOptions | None = None) -> None:
        super().__init__(options)
        self.path = check_model_path(model)
        self._session: Any = None
        self.layout: Layout | None = None
        self._input = ""
        self._input_type = np.float32
        self._size_input: str | None = None
        self.input_size = (DEFAULT_INPUT, DEFAULT_INPUT)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return provider_unavailable(cls.providers[0])

    def _provider_list(self) -> list[Any]:
        return list(self.providers)

    def _activate(self) -> None:
        ort = _ort()
        o: Any = self.options
        so = ort.SessionOptions()
        so.intra_op_num_threads = o.ort.intra_op_threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel(_LEVELS[o.ort.optimization])
        so.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(self.path), so, providers=self._provider_list())
        except Exception as exc:  # onnxruntime raises its own exception types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{self.path}: ONNX Runtime could not load the detector ({first})") from None
        if self.providers[0] not in session.get_providers():
            raise BackendError(f"{self!r}: ONNX Runtime fell back to {session.get_providers()} instead of "
                               f"{self.providers[0]}; run `pairedge doctor`")  # fmt: skip
        self._read_inputs(session)
        metadata = dict(session.get_modelmeta().custom_metadata_map)
        outputs = [(a.name, tuple(a.shape)) for a in session.get_outputs()]
        layout = find_layout(outputs, metadata, self._size_input is not None, self.path.name)
        if o.layout is not None and o.layout != layout.kind:
            layout = _forced(o.layout, outputs, self.path.name)
        self.layout = layout
        self._session = session

    def _read_inputs(self, session: Any) -> None:
        inputs = session.get_inputs()
        images = [a for a in inputs if a.name != _SIZE_INPUT]
        extra = [a.name for a in inputs if a.name == _SIZE_INPUT]
        shape = tuple(images[0].shape) if len(images) == 1 else ()
        if len(images) != 1 or len(shape) != 4 or shape[1] not in (3, "3") and isinstance(shape[1], int):
            got = ", ".join(f"{a.name} {list(a.shape)}" for a in inputs)
            raise ModelError(f"{self.path.name}: expected one image input [1, 3, H, W] (plus RT-DETR's optional "
                             f"{_SIZE_INPUT}), got {got}")  # fmt: skip
        if images[0].type not in ("tensor(float)", "tensor(float16)"):
            raise ModelError(f"{self.path.name}: expected a float32 or float16 image input, got {images[0].type}")
        self._input = images[0].name
        self._input_type = np.float16 if images[0].type == "tensor(float16)" else np.float32
        self._size_input = extra[0] if extra else None
        h, w = shape[2], shape[3]
        if isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0:
            self.input_size = (h, w)
        else:
            o: Any = self.options
            meta = dict(session.get_modelmeta().custom_metadata_map).get("imgsz")
            self.input_size = o.input_size or _imgsz(meta) or (DEFAULT_INPUT, DEFAULT_INPUT)

    def _deactivate(self) -> None:
        self._session = None
        self.layout = None

    def _detect(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        layout = self.layout
        assert layout is not None
        padded, box = letterbox(image, self.input_size, center=layout.center)
        x = padded[..., ::-1] if layout.rgb else padded
        blob = np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)
        if layout.unit_scale:
            blob *= np.float32(1 / 255)
        feeds: dict[str, np.ndarray] = {self._input: blob.astype(self._input_type, copy=False)}
        if self._size_input is not None:
            feeds[self._size_input] = np.array([[self.input_size[1], self.input_size[0]]], np.int64)
        try:
            arrays = self._session.run(list(layout.outputs), feeds)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"{self!r}: inference failed ({first})") from None
        xyxy, scores, classes = decode(layout, arrays, self.input_size, self.path.name)
        return box.undo(xyxy), scores, classes

    def describe(self) -> str:
        kind = self.layout.kind if self.layout is not None else "layout not read yet"
        h, w = self.input_size
        return f"ONNX detector {self.path.name} ({kind}, input {w}x{h}, {self.name}): " + super().describe().split(": ", 1)[1]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.name})"


def _forced(kind: str, outputs: list[tuple[str, tuple[object, ...]]], name: str) -> Layout:
    """The layout ``kind`` forced by ``OnnxDetectorOptions.layout`` (shapes checked at the first frame)."""
    if kind == "detr":
        raise ModelError(f"{name}: layout 'detr' needs outputs named boxes, scores and labels")
    if len(outputs) != 1:
        raise ModelError(f"{name}: layout {kind!r} needs exactly one output, got {len(outputs)}")
    if kind == "yolox":
        return Layout("yolox", (outputs[0][0],), center=False, rgb=False, unit_scale=False)
    return Layout("ultralytics", (outputs[0][0],))


def _imgsz(text: str | None) -> tuple[int, int] | None:
    """Ultralytics' ``imgsz`` metadata (``"[640, 640]"``) as (height, width), or None."""
    if not text:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if isinstance(value, int):
        value = [value, value]
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int) and 32 <= v <= 4096 for v in value):
        return int(value[0]), int(value[1])
    return None


class OnnxCudaDetector(OnnxDetector):
    """An ONNX detector on ONNX Runtime's CUDA provider (needs ``onnxruntime-gpu``)."""

    name = "onnxruntime-cuda"
    providers = ("CUDAExecutionProvider", "CPUExecutionProvider")

    def _provider_list(self) -> list[Any]:
        o: Any = self.options
        return [("CUDAExecutionProvider", {"device_id": o.ort.device_id}), "CPUExecutionProvider"]


class OnnxTensorRTDetector(OnnxDetector):
    """An ONNX detector on ONNX Runtime's TensorRT provider (engine built at activation; set
    ``OrtOptions.trt_cache_dir`` to keep it)."""

    name = "onnxruntime-tensorrt"
    providers = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")

    def _provider_list(self) -> list[Any]:
        o: Any = self.options.ort  # type: ignore[attr-defined]
        trt: dict[str, Any] = {"device_id": o.device_id, "trt_fp16_enable": o.trt_fp16}
        if o.trt_cache_dir:
            trt.update(trt_engine_cache_enable=True, trt_engine_cache_path=o.trt_cache_dir)
            trt.update(trt_timing_cache_enable=True, trt_timing_cache_path=o.trt_cache_dir)
        return [("TensorrtExecutionProvider", trt), ("CUDAExecutionProvider", {"device_id": o.device_id}),
                "CPUExecutionProvider"]  # fmt: skip
