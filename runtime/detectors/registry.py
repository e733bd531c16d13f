"""Person detectors by name, imported lazily (the classifier backends' registry, for detectors).

``open_detector("hog")`` is the zero-download default; ``open_detector("model.onnx", "onnxruntime-cuda")``
an exported detector on a chosen ONNX Runtime provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from pairedge.core.errors import BackendError, InputError
from pairedge.runtime._registry import availability, load_registered
from pairedge.runtime.backends.registry import ALIASES
from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.postprocess import DetectorOptions

#: name -> "module:Class". Read-only.
DETECTORS: Mapping[str, str] = MappingProxyType(
    {
        "hog": "pairedge.runtime.detectors.hog:HogDetector",
        "onnxruntime": "pairedge.runtime.detectors.onnx:OnnxDetector",
        "onnxruntime-cuda": "pairedge.runtime.detectors.onnx:OnnxCudaDetector",
        "onnxruntime-tensorrt": "pairedge.runtime.detectors.onnx:OnnxTensorRTDetector",
    }
)
#: The name of the default detector (no weights file).
DEFAULT_DETECTOR = "hog"


def detector_class(name: str) -> type[Detector]:
    """The class registered under ``name`` (ONNX Runtime aliases such as ``ort-cuda`` accepted)."""
    key = str(name).strip().lower()
    return load_registered(DETECTORS, ALIASES.get(key, key), Detector, "detector")


def available_detectors() -> dict[str, str | None]:
    """Every registered name -> None when it runs here, else the reason it does not."""
    return availability(DETECTORS, lambda name: detector_class(name).unavailable_reason())


def open_detector(
    spec: str | Path = DEFAULT_DETECTOR, backend: str = "onnxruntime", options: DetectorOptions | None = None
) -> Detector:
    """Create (not activate) a detector.

    Args:
        spec: ``"hog"`` (OpenCV's built-in people detector) or the path of an ``.onnx`` detector.
        backend: for an ``.onnx`` file, the ONNX Runtime detector: ``onnxruntime`` (CPU), ``onnxruntime-cuda``,
            ``onnxruntime-tensorrt`` (or their aliases ``ort-cpu``, ``ort-cuda``, ``ort-trt``).
        options: the detector's options (``HogOptions``, ``OnnxDetectorOptions``); None: defaults.

    Raises:
        InputError: unknown backend, or options of another type. BackendError: not available here.
        FormatError: the model file is missing or not ``.onnx``.
    """
    is_hog = str(spec).strip().lower() == DEFAULT_DETECTOR
    name = DEFAULT_DETECTOR if is_hog else backend
    if not is_hog and detector_class(name) is detector_class(DEFAULT_DETECTOR):
        raise InputError(f"backend {backend!r} is not an ONNX Runtime detector; expected onnxruntime, "
                         "onnxruntime-cuda or onnxruntime-tensorrt")  # fmt: skip
    cls = detector_class(name)
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendError(f"detector {name!r} is not available on this machine: {reason}")
    checked = cls.check_options(options)
    if is_hog:
        return cls(checked)
    return cls(Path(spec), checked)  # type: ignore[call-arg]
