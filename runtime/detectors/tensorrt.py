"""A person detector on native TensorRT: the engine ``pairedge build --detector MODEL.onnx`` made.

``open_detector("yolo.fp16.engine")`` (and ``pairedge run VIDEO --detector yolo.fp16.engine``) picks it by
the ``.engine`` suffix. The lifecycle is the classifier TensorRT backend's
(:class:`~pairedge.runtime.backends.tensorrt.TensorRTBackend`), on the same pieces:

``activate()``
    read the detector engine manifest (:mod:`pairedge.runtime.detectors.engine_manifest`) and refuse a
    mismatch (TensorRT version, compute capability, DLA core) with the rebuild command *before* touching the
    engine; check the engine's size and SHA-256; for a DLA engine set ``runtime.DLA_core`` first; then
    ``deserialize_cuda_engine``, one execution context, one stream, a pinned host and a device buffer per I/O
    tensor at the profile's fixed shape, addresses and input shapes set once.
``detect(frame)``
    the layout's project preprocessing at the recorded input size
    (:mod:`pairedge.runtime.detectors.preprocess`) into the pinned input, host -> device,
    ``execute_async_v3``, device -> host of every output, stream synchronise; the recorded layout decodes the
    outputs (:func:`pairedge.runtime.detectors.layouts.decode`) and the shared person filter / threshold / NMS
    / cap keep the boxes, exactly as the ONNX Runtime detector does.
``deactivate()``
    drop context and engine, free the buffers and the stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import BackendError, FormatError, InputError, ModelError
from pairedge.gpu.tensorrt import load_tensorrt
from pairedge.gpu.tensorrt.logger import make_logger
from pairedge.runtime.backends.cudamem import KINDS, open_cuda_memory
from pairedge.runtime.backends.tensorrt import TensorRTBackend, use_dla_core
from pairedge.runtime.backends.tensorrt_loader import (
    check_compatible,
    environment,
    read_verified_engine,
    tensor_dtype,
)
from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.engine_manifest import DetectorEngineManifest
from pairedge.runtime.detectors.layouts import Layout, decode
from pairedge.runtime.detectors.postprocess import DetectorOptions
from pairedge.runtime.detectors.preprocess import letterbox, to_blob

#: ``TensorRTDetectorOptions.dla_core``: run on the device the engine's manifest records.
RECORDED = "recorded"


@dataclass(frozen=True)
class TensorRTDetectorOptions(DetectorOptions):
    """Native TensorRT detector settings beside the shared ones.

    Attributes:
        device_id: CUDA device ordinal.
        memory: the CUDA layer: "auto" (cuda-python, else pycuda), "cuda-python" or "pycuda".
        dla_core: :data:`RECORDED` (default): the device the manifest records (the engine file is the
            choice); None: require a GPU engine; N: require an engine built for DLA core N.
    """

    device_id: int = 0
    memory: str = "auto"
    dla_core: int | None | str = RECORDED

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.memory not in KINDS:
            raise InputError(f"memory: expected one of {', '.join(KINDS)}, got {self.memory!r}")
        core = self.dla_core
        if (
            core != RECORDED
            and core is not None
            and (isinstance(core, bool) or not isinstance(core, int) or core < 0)
        ):
            raise InputError(
                f"dla_core: expected {RECORDED!r}, None (the GPU) or a DLA core index >= 0, got {core!r}"
            )


def check_engine_path(path: str | Path) -> Path:
    """``path`` as a regular ``.engine`` file within :data:`pairedge.core.limits.MAX_ENGINE_BYTES`.

    Raises:
        FormatError: missing, not a regular file, too large, or another suffix.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise FormatError(p, "no such detector engine; build one with `pairedge build --detector MODEL.onnx`")
    limits.regular_file(p, "a serialized TensorRT detector engine", limits.MAX_ENGINE_BYTES)
    if p.suffix.lower() != ".engine":
        raise FormatError(
            p, f"expected a .engine detector from `pairedge build --detector`, got {p.suffix or 'no suffix'}"
        )
    return p


class TensorRTDetector(Detector):
    """A ``pairedge build --detector`` engine on TensorRT (needs TensorRT, cuda-python or pycuda, a GPU).

    Args:
        model: the ``.engine`` file (its ``.engine.json`` manifest beside it).
        options: :class:`TensorRTDetectorOptions`; None for the defaults.
        trt, memory: injected ``tensorrt`` module and CUDA memory layer (tests: the recording fake).
    """

    name = "tensorrt"
    options_type = TensorRTDetectorOptions

    def __init__(
        self,
        model: str | Path,
        options: TensorRTDetectorOptions | None = None,
        *,
        trt: Any = None,
        memory: Any = None,
    ) -> None:
        super().__init__(options)
        self.path = check_engine_path(model)
        self._trt, self._injected_memory = trt, memory
        self.manifest: Any = None
        self.layout: Layout | None = None
        self.input_size = (0, 0)
        self._memory: Any = None
        self._logger: Any = None
        self._runtime: Any = None
        self._engine: Any = None
        self._context: Any = None
        self._stream: Any = None
        self._host: dict[str, np.ndarray] = {}
        self._device: dict[str, int] = {}
        self._handle = 0

    @classmethod
    def unavailable_reason(cls) -> str | None:

        return TensorRTBackend.unavailable_reason()

    # -- lifecycle ----------------------------------------------------------------------------------------
    def _activate(self) -> None:

        trt = self._trt if self._trt is not None else load_tensorrt()
        o: Any = self.options
        self._memory = self._injected_memory or open_cuda_memory(o.memory, o.device_id)
        try:
            env = environment(trt, self._memory)
            manifest = DetectorEngineManifest.read(self.path)
            wanted = manifest.dla_core if o.dla_core == RECORDED else o.dla_core
            onnx = self.path.parent.parent.parent / str(manifest.onnx.get("file", "MODEL.onnx"))
            onnx = onnx if onnx.is_file() else Path(onnx.name)  # engines/<tag>/ beside the ONNX, or elsewhere
            check_compatible(
                manifest, env, onnx_sha256=None, model_dir=onnx, engine=self.path, dla_core=wanted
            )  # type: ignore[arg-type]
            blob = read_verified_engine(self.path, manifest)
            self._logger = make_logger(trt)  # TensorRT keeps a raw pointer: it lives as long as the runtime
            runtime = trt.Runtime(self._logger)
            if manifest.dla_core is not None:
                use_dla_core(runtime, manifest.dla_core, self.path)
            engine = runtime.deserialize_cuda_engine(blob)
            if engine is None:
                raise BackendError(
                    f"{self.path}: TensorRT {env.tensorrt_version} could not deserialize the engine "
                    "although its manifest and hash match; rebuild it"
                )
            self._runtime = runtime
            self._setup(trt, engine, manifest)
        except BaseException:
            self._release()
            raise

    def _setup(self, trt: Any, engine: Any, manifest: Any) -> None:
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        layout = manifest.to_layout
        if sorted(inputs) != sorted(manifest.inputs) or not set(layout.outputs) <= set(names):
            raise ModelError(
                f"{self.path}: the engine's tensors {names} are not the manifest's inputs "
                f"{sorted(manifest.inputs)} and outputs {list(layout.outputs)}; rebuild it"
            )
        context = engine.create_execution_context()
        if context is None:
            raise BackendError(f"{self.path}: could not create an execution context (GPU memory?)")
        memory = self._memory
        self._stream = memory.create_stream()
        self._handle = memory.stream_handle(self._stream)
        for name in names:
            shape = self._shape(engine, name, manifest.inputs.get(name))
            self._host[name] = memory.alloc_pinned(shape, tensor_dtype(trt, engine, name))
            self._device[name] = memory.alloc_device(self._host[name].nbytes)
            context.set_tensor_address(name, self._device[name])
        for name in inputs:
            if not context.set_input_shape(name, tuple(manifest.inputs[name])):
                raise BackendError(
                    f"{self.path}: TensorRT refused the input shape {manifest.inputs[name]} of {name!r}"
                )
        self.manifest, self.layout, self.input_size = manifest, layout, tuple(manifest.input_size)
        self._engine, self._context = engine, context

    def _shape(self, engine: Any, name: str, recorded: list[int] | None) -> tuple[int, ...]:
        """The fixed shape of an I/O tensor: an input's from the manifest, an output's from the engine (a
        dynamic batch axis is 1, the profile's)."""
        if recorded is not None:
            return tuple(recorded)
        shape = tuple(int(d) for d in engine.get_tensor_shape(name))
        if shape and shape[0] == -1:
            shape = (1, *shape[1:])
        if any(d < 0 for d in shape):
            raise ModelError(
                f"{self.path}: output {name!r} has dynamic dimensions {list(shape)}; export the "
                "detector with fixed output shapes"
            )
        return shape

    def _release(self) -> None:
        self._context = self._engine = self._runtime = self._logger = None
        self._host, self._device, self._stream = {}, {}, None
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def _deactivate(self) -> None:
        self._release()
        self.layout = None

    # -- detection ----------------------------------------------------------------------------------------
    def _detect(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        layout, manifest, memory = self.layout, self.manifest, self._memory
        assert layout is not None and manifest is not None and memory is not None
        pre = layout.preprocess
        canvas, box = letterbox(image, self.input_size, pre.resize, pre.pad)
        host_in = self._host[manifest.image_input]
        host_in[...] = to_blob(canvas, pre.rgb, pre.unit_scale)  # the ONNX Runtime detector's arithmetic
        memory.htod_async(self._device[manifest.image_input], host_in, self._stream)
        if manifest.size_input is not None:
            sizes = self._host[manifest.size_input]
            sizes[...] = (self.input_size[1], self.input_size[0])  # RT-DETR's (width, height)
            memory.htod_async(self._device[manifest.size_input], sizes, self._stream)
        if not self._context.execute_async_v3(self._handle):
            raise BackendError(f"{self!r}: execute_async_v3 failed; see the pairedge.tensorrt log")
        for name in layout.outputs:
            memory.dtoh_async(self._host[name], self._device[name], self._stream)
        memory.synchronize(self._stream)
        arrays = [self._host[name].copy() for name in layout.outputs]
        xyxy, scores, classes = decode(layout, arrays, self.input_size, self.path.name)
        return box.undo(xyxy), scores, classes

    def describe(self) -> str:
        kind = self.layout.kind if self.layout is not None else "layout not read yet"
        h, w = self.input_size
        where = self.manifest.device if self.manifest is not None else "device not read yet"
        precision = self.manifest.precision if self.manifest is not None else "?"
        rest = super().describe().split(": ", 1)[1]
        return f"TensorRT detector {self.path.name} ({kind}, input {w}x{h}, {precision}, {where}): {rest}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.name})"
