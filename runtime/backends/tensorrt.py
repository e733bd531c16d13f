"""Native TensorRT classifier backend: a serialized engine from ``pairedge build``, run with TensorRT's API.

Lifecycle (Polygraphy's runner style, as :class:`~pairedge.runtime.backends.base.Backend` defines it):

``activate()``
    find the engine of this model file
    (``MODEL_DIR/engines/<device>-sm<cc>-trt<ver>/stage{n}.<precision>.engine`` or
    :attr:`TensorRTOptions.engine`), read its manifest and refuse a mismatch (TensorRT version, compute
    capability, ONNX SHA-256, DLA core) *before* touching the engine, check the file's size and SHA-256, then
    (for a DLA engine, ``runtime.DLA_core = N`` first) ``Runtime.deserialize_cuda_engine``; one
    ``IExecutionContext``; one stream; device buffers sized to the profile's max pairs; pinned host buffers of
    the same size; tensor addresses set once.
``infer(features)``
    per chunk of at most ``max`` pairs (more pairs are split into several chunks; fewer than the profile's
    ``min`` are zero-padded up to it): copy into the pinned input, ``cudaMemcpyAsync`` host -> device,
    ``set_input_shape``, ``execute_async_v3`` on the stream, device -> host copy, stream synchronise.
``deactivate()``
    drop the context and engine, free buffers and the stream.

Memory goes through the one CUDA layer (:mod:`pairedge.gpu.cuda`, opened by
:mod:`pairedge.runtime.backends.cudamem`: cuda-python by default, pycuda accepted); tests inject the emulated
device to run the buffer handling for real.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core import artefacts
from pairedge.core.errors import BackendError, DeviceUnavailableError, InputError, ModelError
from pairedge.gpu.cuda import binding_reason
from pairedge.gpu.tensorrt import load_tensorrt
from pairedge.gpu.tensorrt.logger import make_logger
from pairedge.runtime.backends.base import Backend
from pairedge.runtime.backends.cudamem import KINDS, CudaMemory, open_cuda_memory
from pairedge.runtime.backends.model import ModelFile
from pairedge.runtime.backends.tensorrt_loader import (
    EngineManifest,
    check_compatible,
    device_label,
    dla_arguments,
    engine_folder,
    environment,
    read_verified_engine,
    sha256_file,
    tensor_dtype,
)


@dataclass(frozen=True)
class TensorRTOptions:
    """Options of the native TensorRT backend.

    Attributes:
        engine: an explicit engine file (its manifest beside it); None: found in the model folder.
        engine_dir: folder holding ``stage{n}.<precision>.engine``; None: ``MODEL_DIR/engines/<device tag>``.
        precision: which engine; None: the precision :mod:`pairedge.core.artefacts` records for the model's
            ONNX file (``stage1.fp16.onnx`` -> fp16; a file the table does not name -> fp32).
        device_id: CUDA device ordinal.
        memory: the CUDA layer's implementation: "auto" (cuda-python, else pycuda), "cuda-python" or "pycuda".
        dla_core: run on this DLA core of a Jetson Orin (the engine ``pairedge build --dla-core N`` made, in
            ``engines/<device tag>-dla<N>/``); None: the GPU. An engine whose manifest records another device
            is refused with the rebuild command.
    """

    engine: str | None = None
    engine_dir: str | None = None
    precision: str | None = None
    device_id: int = 0
    memory: str = "auto"
    dla_core: int | None = None

    @staticmethod
    def with_precision(options: object | None, precision: str) -> object | None:
        """``options`` (the tensorrt backend's, or None) naming the engines of ``precision``, the precision
        of the model files the pipeline opened: the engine is found by it, not by the ONNX file's name.
        Another backend's options come back unchanged (that backend refuses them with its own message).

        Raises:
            InputError: ``options`` that name another precision.
        """
        if not isinstance(options, TensorRTOptions | None):
            return options
        options = options or TensorRTOptions()
        if options.precision is not None and options.precision != precision:
            raise InputError(
                f"backend_options.precision: {options.precision!r} contradicts the model files' precision "
                f"{precision!r}"
            )
        return replace(options, precision=precision)

    def __post_init__(self) -> None:
        if self.memory not in KINDS:
            raise InputError(f"memory: expected one of {', '.join(KINDS)}, got {self.memory!r}")
        core = self.dla_core
        if core is not None and (isinstance(core, bool) or not isinstance(core, int) or core < 0):
            raise InputError(f"dla_core: expected a DLA core index >= 0 or None (the GPU), got {core!r}")
        if self.precision is not None:
            artefacts.check_precision(self.precision)


class TensorRTBackend(Backend):
    """A ``pairedge build`` engine on TensorRT (needs TensorRT, cuda-python or pycuda, and a GPU).

    Args:
        model: the checked ONNX model the engine was built from (labels, spec and hash come from it).
        options: :class:`TensorRTOptions`; None for the defaults.
        trt, memory: injected ``tensorrt`` module and :class:`pairedge.gpu.cuda.Device` (tests: a recording
        fake,
            or the emulated device; default: the real ones).
    """

    name = "tensorrt"
    engine_path: Path | None

    options_type = TensorRTOptions

    def __init__(
        self, model: ModelFile, options: TensorRTOptions | None = None, *, trt: Any = None, memory: Any = None
    ) -> None:
        super().__init__(model)
        if options is not None and not isinstance(options, TensorRTOptions):
            raise InputError(
                f"tensorrt backend: expected TensorRTOptions, got {type(options).__name__}; pass "
                "pairedge.runtime.backends.tensorrt.TensorRTOptions(...) or None"
            )
        self.options = options or TensorRTOptions()
        self._trt = trt
        self._injected_memory: CudaMemory | None = memory
        self._memory: CudaMemory | None = None
        self.engine_path = None
        #: the engine manifest of the active engine (None before activation).
        self.manifest: Any = None
        self.profile_min = self.profile_max = 0
        self._logger: Any = None
        self._runtime: Any = None
        self._engine: Any = None
        self._context: Any = None

    @classmethod
    def unavailable_reason(cls) -> str | None:

        try:
            load_tensorrt()  # lazy: only when asked whether this backend can run
        except ImportError as exc:  # not installed, or stubs only: the message says how to get it
            return str(exc)
        return binding_reason()  # the CUDA layer's memory: cuda-python, else pycuda

    # -- lifecycle ----------------------------------------------------------------------------------------
    def _activate(self) -> None:

        trt = self._trt if self._trt is not None else load_tensorrt()
        memory = self._injected_memory or open_cuda_memory(self.options.memory, self.options.device_id)
        self._memory = memory
        try:
            env = environment(trt, memory)
            engine_path = self._locate(env)
            blob = self._checked_engine_bytes(engine_path, env)
            self._logger = make_logger(
                trt
            )  # TensorRT keeps a raw pointer to it: it lives as long as the runtime
            runtime = trt.Runtime(self._logger)
            if self.options.dla_core is not None:
                use_dla_core(runtime, self.options.dla_core, engine_path)
            engine = runtime.deserialize_cuda_engine(blob)
            if engine is None:
                raise BackendError(
                    f"{engine_path}: TensorRT {env.tensorrt_version} could not deserialize the engine "
                    "although its manifest and hash match; rebuild it with `pairedge build`"
                )
            self._setup(trt, engine, engine_path, memory)
            self._runtime = runtime
            self.engine_path = engine_path
        except BaseException:
            self._release()
            raise

    @property
    def precision(self) -> str:
        """The engine's precision: :attr:`TensorRTOptions.precision`, else the table's record of the ONNX file
        (a loose file the table does not name, e.g. ``model.onnx``, is served by its fp32 engine)."""
        if self.options.precision:
            return self.options.precision
        listed = artefacts.find(self.model.path)
        return listed.precision if listed is not None else "fp32"

    def _locate(self, env: Any) -> Path:
        if self.options.engine:
            return Path(self.options.engine).expanduser()
        precision = self.precision
        folder = (
            Path(self.options.engine_dir).expanduser()
            if self.options.engine_dir
            else self.model.path.parent
            / artefacts.ENGINES_DIR
            / engine_folder(env.tag, self.options.dla_core)
        )
        path = folder / artefacts.artefact(self.model.metadata.stage, precision).engine
        if not path.is_file():
            raise ModelError(
                f"{path}: no {precision} engine for this device ({env.device_name}, compute capability "
                f"{env.compute_capability}, TensorRT {env.tensorrt_version}, "
                f"{device_label(self.options.dla_core)}); build it here with: pairedge build "
                f"{self.model.path.parent} --precision {precision}"
                + "".join(f" {a}" for a in dla_arguments(self.options.dla_core, False))
            )
        return path

    def _checked_engine_bytes(self, engine_path: Path, env: Any) -> bytes:

        manifest = EngineManifest.read(engine_path)
        if manifest.stage != self.model.metadata.stage:
            raise ModelError(
                f"{engine_path}: a stage-{manifest.stage} engine cannot serve the "
                f"stage-{self.model.metadata.stage} model {self.model.path.name}"
            )
        check_compatible(
            manifest,
            env,
            onnx_sha256=sha256_file(self.model.path),
            model_dir=self.model.path.parent,
            engine=engine_path,
            dla_core=self.options.dla_core,
        )
        self.manifest = manifest
        return read_verified_engine(engine_path, manifest)

    def _setup(self, trt: Any, engine: Any, engine_path: Path, memory: CudaMemory) -> None:
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        if len(inputs) != 1 or not outputs:
            raise BackendError(
                f"{engine_path}: expected one input and an output tensor, got {inputs} / {outputs}"
            )
        self._input, self._output = inputs[0], outputs[0]
        lo, _, hi = (tuple(d) for d in engine.get_tensor_profile_shape(self._input, 0))
        self.profile_min, self.profile_max = int(lo[0]), int(hi[0])
        width = tuple(engine.get_tensor_shape(self._input))[1]
        if width != self.num_features:
            raise ModelError(
                f"{engine_path}: the engine takes {width} features, the model {self.model.path.name} "
                f"{self.num_features}"
            )
        dtype_in = tensor_dtype(trt, engine, self._input)
        dtype_out = tensor_dtype(trt, engine, self._output)
        context = engine.create_execution_context()
        if context is None:
            raise BackendError(f"{engine_path}: could not create an execution context (GPU memory?)")
        self._stream = memory.create_stream()
        self._handle = memory.stream_handle(self._stream)
        self._host_in = memory.alloc_pinned((self.profile_max, self.num_features), dtype_in)
        self._host_out = memory.alloc_pinned((self.profile_max, self.num_classes), dtype_out)
        dev_in = memory.alloc_device(self._host_in.nbytes)
        dev_out = memory.alloc_device(self._host_out.nbytes)
        self._dev_in, self._dev_out = dev_in, dev_out
        context.set_tensor_address(self._input, dev_in)
        context.set_tensor_address(self._output, dev_out)
        self._engine, self._context = engine, context

    def _release(self) -> None:
        self._context = None
        self._engine = None
        self._runtime = None
        self._logger = None
        # drop the views of pinned memory and the stream while the CUDA context is still current (pycuda
        # frees page-locked arrays and streams when they are collected); then the layer frees the rest
        self._host_in = self._host_out = self._stream = None
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def _deactivate(self) -> None:
        self._release()

    # -- inference ----------------------------------------------------------------------------------------
    def _infer(self, features: np.ndarray) -> np.ndarray:
        out = np.empty((len(features), self.num_classes), np.float32)
        for start in range(0, len(features), self.profile_max):
            chunk = features[start : start + self.profile_max]
            out[start : start + len(chunk)] = self._run_chunk(chunk)
        return out

    def _run_chunk(self, chunk: np.ndarray) -> np.ndarray:
        n = len(chunk)
        rows = max(n, self.profile_min)
        memory = self._memory
        assert memory is not None
        host_in = self._host_in[:rows]
        host_in[:n] = chunk
        if rows > n:
            host_in[n:] = 0
        host_out = self._host_out[:rows]
        memory.htod_async(self._dev_in, host_in, self._stream)
        if not self._context.set_input_shape(self._input, (rows, self.num_features)):
            raise BackendError(
                f"{self!r}: TensorRT refused input shape ({rows}, {self.num_features}) "
                f"(profile {self.profile_min}..{self.profile_max} pairs)"
            )
        if not self._context.execute_async_v3(self._handle):
            raise BackendError(f"{self!r}: execute_async_v3 failed; see the pairedge.tensorrt log")
        memory.dtoh_async(host_out, self._dev_out, self._stream)
        memory.synchronize(self._stream)
        return host_out[:n].astype(np.float32, copy=True)

    def __repr__(self) -> str:
        where = self.engine_path.name if self.engine_path else self.model.path.name
        return f"{type(self).__name__}({where})"


def use_dla_core(runtime: Any, core: int, engine_path: Path) -> None:
    """Point a ``trt.Runtime`` at DLA core ``core`` (before ``deserialize_cuda_engine``, as TensorRT needs).

    Raises:
        DeviceUnavailableError: this device has no such DLA core (``runtime.num_DLA_cores``).
    """
    cores = int(runtime.num_DLA_cores)
    if core >= cores:
        raise DeviceUnavailableError(
            f"{engine_path}: built for DLA core {core}, but this device has "
            + (f"{cores} DLA cores (0..{cores - 1})" if cores else "no DLA")
        )
    runtime.DLA_core = core
