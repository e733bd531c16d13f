"""ONNX person detectors on ONNX Runtime: CPU (default), CUDA and TensorRT execution providers.

The output layout is told apart when the detector is activated, from the graph's declared interface
(:mod:`pairedge.runtime.detectors.graph`) and one warm-up run's output shapes
(:mod:`pairedge.runtime.detectors.layouts` lists what is accepted); frames go in the way the layout's project
prepares them (:mod:`pairedge.runtime.detectors.preprocess`) and the boxes are mapped back and filtered in
:mod:`pairedge.runtime.detectors.postprocess`. Session
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
from pairedge.runtime.backends.ort import OrtOptions
from pairedge.runtime.backends.ort_session import (
    ProviderFallbackError,
    SessionError,
    make_session,
    provider_unavailable,
)
from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.graph import DetectorGraph, read_detector_graph
from pairedge.runtime.detectors.layouts import LAYOUTS, GraphFacts, Layout, decode, forced, identify
from pairedge.runtime.detectors.postprocess import DetectorOptions
from pairedge.runtime.detectors.preprocess import letterbox, to_blob

#: The network input side used when the model's input is dynamic and its metadata names no ``imgsz``.
DEFAULT_INPUT = 640


@dataclass(frozen=True)
class OnnxDetectorOptions(DetectorOptions):
    """ONNX detector settings beside the shared ones.

    Attributes:
        ort: ONNX Runtime session options (those of the classifier backends).
        input_size: (height, width) fed to a model whose input is dynamic; None: its metadata ``imgsz``, else
            640 x 640. Ignored for a static input.
        layout: one of :data:`~pairedge.runtime.detectors.layouts.LAYOUTS` to override the layout told apart
            from the graph (``--detector-layout``); None: tell it apart.
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
            isinstance(size, tuple)
            and len(size) == 2
            and all(isinstance(v, int) and 32 <= v <= limits.MAX_DETECTOR_INPUT_SIDE for v in size)
        ):
            raise InputError(
                f"input_size: expected (height, width), integers in [32, {limits.MAX_DETECTOR_INPUT_SIDE}], "
                f"got {size!r}"
            )
        if self.layout is not None and self.layout not in LAYOUTS:
            raise InputError(f"layout: expected one of {', '.join(LAYOUTS)} or None, got {self.layout!r}")


def check_model_path(path: str | Path) -> Path:
    """``path`` as a readable ``.onnx`` file within ``pairedge.core.limits.MAX_MODEL_BYTES``.

    Raises:
        FormatError: missing, not a file, not ``.onnx``, or too large.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise FormatError(
            p, "no such detector model file; expected an .onnx file (or 'hog' for the built-in one)"
        )
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
        label: how notes name it (the bundled detector's name); None: the file name.
    """

    name = "onnxruntime"
    options_type = OnnxDetectorOptions
    providers: ClassVar[tuple[str, ...]] = ("CPUExecutionProvider",)

    def __init__(
        self, model: str | Path, options: OnnxDetectorOptions | None = None, label: str | None = None
    ) -> None:
        super().__init__(options)
        self.path = check_model_path(model)
        self._label = label or self.path.name
        self._session: Any = None
        self.layout: Layout | None = None
        self.graph: DetectorGraph | None = None
        self._size_input: str | None = None
        self.input_size = (DEFAULT_INPUT, DEFAULT_INPUT)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return provider_unavailable(cls.providers[0])

    def _provider_list(self) -> list[Any]:
        return list(self.providers)

    def _activate(self) -> None:
        o: Any = self.options
        graph = read_detector_graph(self.path)  # sizes checked against their ceiling before any session
        self.input_size = (
            graph.fixed_size
            or o.input_size
            or _imgsz(graph.metadata.get("imgsz"))
            or (DEFAULT_INPUT, DEFAULT_INPUT)
        )
        try:
            session = make_session(
                self.path,
                threads=o.ort.intra_op_threads,
                optimization=o.ort.optimization,
                providers=self._provider_list(),
                what=f"the detector {self.path}",
            )
        except ProviderFallbackError:
            raise
        except SessionError as exc:
            raise ModelError(
                str(exc)
            ) from None  # a detector file ONNX Runtime cannot load is a model problem
        self._session, self.graph = session, graph
        self._size_input = graph.size_input
        # one run on a grey frame: warms the session and gives the concrete output shapes
        shapes = self._probe()
        facts = GraphFacts(
            self.path.name,
            tuple((n, shapes[n]) for n, _ in graph.outputs),
            graph.metadata,
            graph.op_types,
            self.input_size,
            graph.size_input is not None,
        )
        self.layout = identify(facts) if o.layout is None else forced(o.layout, facts)

    def _probe(self) -> dict[str, tuple[int | str, ...]]:
        """Run the session once on a grey input; output name -> its shape."""
        assert self.graph is not None
        h, w = self.input_size
        feeds = {self.graph.image_input: np.full((1, 3, h, w), 0.5, _DTYPES[self.graph.image_type])}
        if self._size_input is not None:
            feeds[self._size_input] = np.array([[w, h]], np.int64)
        names = [n for n, _ in self.graph.outputs]
        try:
            arrays = self._session.run(names, feeds)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{self.path}: the detector does not run on a {w}x{h} input ({first})") from None
        return {n: tuple(int(d) for d in np.shape(a)) for n, a in zip(names, arrays, strict=True)}

    def _deactivate(self) -> None:
        self._session = None
        self.layout = None

    def _detect(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        layout, graph = self.layout, self.graph
        assert layout is not None and graph is not None
        pre = layout.preprocess
        canvas, box = letterbox(image, self.input_size, pre.resize, pre.pad)
        blob = to_blob(canvas, pre.rgb, pre.unit_scale)
        feeds: dict[str, np.ndarray] = {graph.image_input: blob.astype(_DTYPES[graph.image_type], copy=False)}
        if self._size_input is not None:
            feeds[self._size_input] = np.array([[self.input_size[1], self.input_size[0]]], np.int64)
        try:
            arrays = self._session.run(list(layout.outputs), feeds)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendError(f"{self!r}: inference failed ({first})") from None
        xyxy, scores, classes = decode(layout, arrays, self.input_size, self.path.name)
        return box.undo(xyxy), scores, classes

    def layout_note(self) -> str:
        """Which layout is read and why (for run notes and errors)."""
        if self.layout is None:
            return "layout not read yet"
        return f"layout {self.layout.kind} ({self.layout.reason})"

    def describe(self) -> str:
        kind = self.layout.kind if self.layout is not None else "layout not read yet"
        h, w = self.input_size
        extra = self.graph.precision_note() if self.graph is not None else ""
        rest = super().describe().split(": ", 1)[1]
        return f"ONNX detector {self._label} ({kind}, input {w}x{h}{extra}, {self.name}): {rest}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.name})"


_DTYPES = {"float32": np.float32, "float16": np.float16}


def _imgsz(text: str | None) -> tuple[int, int] | None:
    """Ultralytics' ``imgsz`` metadata (``"[640, 640]"``) as (height, width), or None."""
    if not text:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, int):
        value = [value, value]
    side = limits.MAX_DETECTOR_INPUT_SIDE
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) and 32 <= v <= side for v in value)
    ):
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
        return [
            ("TensorrtExecutionProvider", trt),
            ("CUDAExecutionProvider", {"device_id": o.device_id}),
            "CPUExecutionProvider",
        ]
