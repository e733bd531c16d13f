"""Person detectors by name, imported lazily (the classifier backends' registry, for detectors).

``open_detector()`` is the bundled YOLOX-Nano (:mod:`pairedge.runtime.detectors.bundled`, the default);
``open_detector("hog")`` OpenCV's built-in HOG people detector (no weights file);
``open_detector("model.onnx", "onnxruntime-cuda")`` an exported detector on a chosen ONNX Runtime provider;
``open_detector("model.fp16.engine")`` the engine ``pairedge build --detector`` made, on native TensorRT
(chosen by the ``.engine`` suffix, whatever backend).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from pairedge.core.errors import BackendError, InputError
from pairedge.runtime._registry import availability, load_registered
from pairedge.runtime.backends.registry import ALIASES
from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.bundled import (
    BUNDLED_DETECTORS,
    DEFAULT_DETECTOR,
    bundled_detector,
    is_bundled_name,
)
from pairedge.runtime.detectors.postprocess import DetectorOptions

#: name -> "module:Class". Read-only.
DETECTORS: Mapping[str, str] = MappingProxyType(
    {
        "hog": "pairedge.runtime.detectors.hog:HogDetector",
        "onnxruntime": "pairedge.runtime.detectors.onnx:OnnxDetector",
        "onnxruntime-cuda": "pairedge.runtime.detectors.onnx:OnnxCudaDetector",
        "onnxruntime-tensorrt": "pairedge.runtime.detectors.onnx:OnnxTensorRTDetector",
        "tensorrt": "pairedge.runtime.detectors.tensorrt:TensorRTDetector",
    }
)
#: The suffix of a serialized engine: such a ``spec`` always runs on the native ``tensorrt`` detector.
ENGINE_SUFFIX = ".engine"
#: OpenCV's built-in people detector (no weights file).
HOG = "hog"


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
        spec: a bundled detector's name (``"yolox-nano"``, the default; its SHA-256 is checked against its
            manifest), ``"hog"`` (OpenCV's built-in people detector), the path of an ``.onnx`` detector, or of
            a ``.engine`` from ``pairedge build --detector`` (native TensorRT).
        backend: for an ``.onnx`` file, the ONNX Runtime detector: ``onnxruntime`` (CPU),
            ``onnxruntime-cuda``, ``onnxruntime-tensorrt`` (or their aliases ``ort-cpu``, ``ort-cuda``,
            ``ort-trt``). A ``.engine`` runs on ``tensorrt`` (``onnxruntime``, the default, is taken to mean
            "not chosen").
        options: the detector's options (``HogOptions``, ``OnnxDetectorOptions``,
            ``TensorRTDetectorOptions``);
            None: defaults. For a ``.engine``, ONNX detector options keep their shared fields (threshold, NMS,
            person class, cap) and the GPU index.

    Raises:
        InputError: unknown backend, options of another type, a ``.engine`` with an ONNX Runtime GPU backend,
            or an ``.onnx`` with the ``tensorrt`` backend (build its engine first). BackendError: not
            available here. FormatError: the model file is missing or of another suffix.
    """
    is_hog = str(spec).strip().lower() == HOG
    label = None
    if is_bundled_name(spec):
        bundled = bundled_detector(str(spec))
        label, spec = bundled.describe(), bundled.path("fp32")
    name = HOG if is_hog else backend
    if not is_hog:
        name, options = _engine_choice(Path(spec), backend, options)
    if not is_hog and detector_class(name) is detector_class(HOG):
        raise InputError(
            f"backend {backend!r} is not an ONNX Runtime detector; expected onnxruntime, "
            "onnxruntime-cuda, onnxruntime-tensorrt or tensorrt"
        )
    cls = detector_class(name)
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendError(f"detector {name!r} is not available on this machine: {reason}")
    checked = cls.check_options(options)
    if is_hog:
        return cls(checked)
    if label is not None:
        return cls(Path(spec), checked, label=label)  # type: ignore[call-arg]
    return cls(Path(spec), checked)  # type: ignore[call-arg]


def detector_names() -> tuple[str, ...]:
    """The detectors that need no file: the bundled ones (the default first) and ``hog``."""
    return (DEFAULT_DETECTOR, *(n for n in BUNDLED_DETECTORS if n != DEFAULT_DETECTOR), HOG)


def _engine_choice(
    spec: Path, backend: str, options: DetectorOptions | None
) -> tuple[str, DetectorOptions | None]:
    """The detector name and options for a model file: a ``.engine`` -> ``tensorrt`` (ONNX detector options
    carried over), an ``.onnx`` -> ``backend``."""
    is_engine = spec.suffix.lower() == ENGINE_SUFFIX
    chosen = detector_class(backend)
    native = detector_class("tensorrt")
    if not is_engine:
        if chosen is native:
            raise InputError(
                f"{spec}: the tensorrt detector runs an engine; build it with `pairedge build --detector "
                f"{spec}` and pass the .engine it writes"
            )
        return backend, options
    if chosen is not native and chosen is not detector_class("onnxruntime"):
        raise InputError(f"{spec}: a TensorRT engine runs on the tensorrt detector, not {backend!r}")
    if options is not None and not isinstance(options, native.options_type):
        shared = {f: getattr(options, f) for f in DetectorOptions.__dataclass_fields__}
        ort = getattr(options, "ort", None)
        if ort is not None:
            shared["device_id"] = ort.device_id
        options = native.options_type(**shared)
    return "tensorrt", options
