"""ONNX Runtime classifier backends: CPU (default), CUDA and TensorRT execution providers.

The CPU package ``onnxruntime`` offers only the CPU provider; GPU users swap it for ``onnxruntime-gpu``
(never both: they install the same module), which adds the CUDA and TensorRT providers.

Measured on this project's 2-core x86 CPU box (ORT 1.32, one intra-op thread, 2-layer MLP): binding inputs
and outputs through ``io_binding`` costs about 2 us more per call than ``session.run`` for 1 to 4,950
pairs, so the CPU backend uses plain ``run``; ``io_binding=True`` is an option for the GPU providers, where
it avoids an output copy through the default allocator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pairedge.core.errors import BackendError, InputError
from pairedge.core.modelmeta import INPUT_NAME, OUTPUT_NAME
from pairedge.runtime.backends.base import Backend
from pairedge.runtime.backends.model import ModelFile
from pairedge.runtime.backends.ort_session import OPTIMIZATION_LEVELS, make_session, provider_unavailable

__all__ = ["OnnxRuntimeBackend", "OrtOptions", "provider_unavailable"]  # provider_unavailable: re-exported


@dataclass(frozen=True)
class OrtOptions:
    """Session options.

    Attributes:
        intra_op_threads: threads of one operator; 1 (default) keeps the runtime single-threaded, 0 lets
            ONNX Runtime use every core.
        optimization: graph optimisation level, "disable" / "basic" / "extended" / "all".
        io_binding: bind input and output buffers instead of ``session.run`` (helps on GPU providers).
        device_id: GPU index for the CUDA / TensorRT providers.
        trt_fp16: allow fp16 kernels in the TensorRT provider.
        trt_cache_dir: folder where the TensorRT provider caches its engines and its timing cache (None: no
            cache).
        trt_int8: run Q/DQ models in int8 on the TensorRT provider; None: on when the model has Q/DQ nodes
            (``stage*.int8.onnx`` from ``pairedge calibrate``; no calibration table is needed).
        trt_profile: (min, opt, max) pairs of the TensorRT provider's optimisation profile; None: the
            provider's own (it rebuilds the engine when a larger batch arrives).
    """

    intra_op_threads: int = 1
    optimization: str = "all"
    io_binding: bool = False
    device_id: int = 0
    trt_fp16: bool = False
    trt_cache_dir: str | None = None
    trt_int8: bool | None = None
    trt_profile: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.intra_op_threads, int) or self.intra_op_threads < 0:
            raise InputError(f"intra_op_threads: expected an int >= 0, got {self.intra_op_threads!r}")
        if self.optimization not in OPTIMIZATION_LEVELS:
            raise InputError(
                f"optimization: expected one of {sorted(OPTIMIZATION_LEVELS)}, got {self.optimization!r}"
            )
        profile = self.trt_profile
        if profile is not None and not (
            isinstance(profile, tuple | list)
            and len(profile) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in profile)
            and profile[0] <= profile[1] <= profile[2]
        ):
            raise InputError(
                f"trt_profile: expected (min, opt, max) pair counts, integers with 1 <= min <= opt <= max, "
                f"got {profile!r}"
            )


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime on the CPU execution provider.

    Args:
        model: the checked model file.
        options: :class:`OrtOptions`; None for the defaults.
    """

    name = "onnxruntime"
    options_type = OrtOptions
    #: The provider that must be present; later entries are fallbacks for unsupported operators.
    providers: ClassVar[tuple[str, ...]] = ("CPUExecutionProvider",)

    def __init__(self, model: ModelFile, options: OrtOptions | None = None) -> None:
        super().__init__(model)
        self.check_options(options)
        self.options = options or OrtOptions()
        self._session: Any = None
        self._binding: Any = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return provider_unavailable(cls.providers[0])

    def _provider_list(self) -> list[Any]:
        return list(self.providers)

    def _activate(self) -> None:
        session = make_session(
            self.model.path,
            threads=self.options.intra_op_threads,
            optimization=self.options.optimization,
            providers=self._provider_list(),
            what=repr(self),
        )
        self._session = session
        self._binding = session.io_binding() if self.options.io_binding else None

    def _deactivate(self) -> None:
        self._session = None
        self._binding = None

    def _infer(self, features: np.ndarray) -> np.ndarray:
        try:
            if self._binding is None:
                out = self._session.run([OUTPUT_NAME], {INPUT_NAME: features})[0]
            else:
                self._binding.bind_cpu_input(INPUT_NAME, features)
                self._binding.bind_output(OUTPUT_NAME, "cpu")
                self._session.run_with_iobinding(self._binding)
                out = self._binding.copy_outputs_to_cpu()[0]
        except Exception as exc:
            raise BackendError(f"{self!r}: inference failed ({exc})") from None
        return np.asarray(out, dtype=np.float32)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.path.name}, threads={self.options.intra_op_threads})"


class OnnxRuntimeCudaBackend(OnnxRuntimeBackend):
    """ONNX Runtime on the CUDA execution provider (needs ``onnxruntime-gpu``)."""

    name = "onnxruntime-cuda"
    providers = ("CUDAExecutionProvider", "CPUExecutionProvider")

    def _provider_list(self) -> list[Any]:
        return [("CUDAExecutionProvider", {"device_id": self.options.device_id}), "CPUExecutionProvider"]


class OnnxRuntimeTensorRTBackend(OnnxRuntimeBackend):
    """ONNX Runtime on the TensorRT execution provider (needs ``onnxruntime-gpu`` and TensorRT libraries).

    The provider builds a TensorRT engine on the first inference of each new input shape range, which takes
    seconds to minutes; set ``trt_cache_dir`` to keep the engines between runs.
    """

    name = "onnxruntime-tensorrt"
    providers = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")

    def _provider_list(self) -> list[Any]:
        trt: dict[str, Any] = {"device_id": self.options.device_id, "trt_fp16_enable": self.options.trt_fp16}
        if self.options.trt_cache_dir:
            trt.update(trt_engine_cache_enable=True, trt_engine_cache_path=self.options.trt_cache_dir)
            trt.update(trt_timing_cache_enable=True, trt_timing_cache_path=self.options.trt_cache_dir)
        int8 = self.options.trt_int8 if self.options.trt_int8 is not None else _has_qdq(self.model.path)
        if int8:
            trt["trt_int8_enable"] = True
        if self.options.trt_profile is not None:
            width = self.model.num_features
            for key, pairs in zip(("min", "opt", "max"), self.options.trt_profile, strict=True):
                trt[f"trt_profile_{key}_shapes"] = f"{INPUT_NAME}:{pairs}x{width}"
        return [
            ("TensorrtExecutionProvider", trt),
            ("CUDAExecutionProvider", {"device_id": self.options.device_id}),
            "CPUExecutionProvider",
        ]


def _has_qdq(path: Any) -> bool:
    """Whether the ONNX file has QuantizeLinear / DequantizeLinear nodes (explicit int8 quantization)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in graph.node)
