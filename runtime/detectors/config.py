"""Which person detector runs when the boxes do not come from a file or a topic, as one checked value."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pairedge.core.errors import InputError
from pairedge.core.settings import setting
from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.bundled import DEFAULT_DETECTOR
from pairedge.runtime.detectors.layouts import LAYOUTS
from pairedge.runtime.detectors.postprocess import MAX_DETECTIONS
from pairedge.runtime.detectors.registry import ENGINE_SUFFIX, HOG, detector_class, open_detector

#: The ONNX Runtime providers an ``.onnx`` detector runs on (registry names of
#: :data:`~pairedge.runtime.detectors.registry.DETECTORS`).
ONNX_DETECTOR_BACKENDS: tuple[str, ...] = ("onnxruntime", "onnxruntime-cuda", "onnxruntime-tensorrt")


@dataclass(frozen=True)
class DetectorConfig:
    """The person detector of ``pairedge run`` without a detection file and of the ROS node.

    Attributes:
        detector, backend, layout: settings (their help below). ``detector`` None (or an empty string,
            stored as None): no detector, the boxes come from a detection file or topic.

    Raises:
        InputError: a layout that is not one of :data:`~pairedge.runtime.detectors.layouts.LAYOUTS`.
    """

    detector: str | Path | None = field(
        default=DEFAULT_DETECTOR,
        metadata=setting(
            f"Person detector when no boxes are given: '{DEFAULT_DETECTOR}' (the bundled CNN, YOLOX-Nano, "
            "Apache-2.0; the default), 'hog' (OpenCV's built-in HOG, no weights file), an exported .onnx "
            "detector (its layout told apart from the graph: YOLOX raw or decoded, YOLOv5, Ultralytics "
            "YOLOv8/11 with or without NMS, RT-DETR / D-FINE; COCO class 0 kept) or the .engine pairedge "
            "build --detector made; ROS: empty = boxes from detections_topic.",
            kind=str,
            ros=True,
        ),
    )
    backend: str = field(
        default="onnxruntime",
        metadata=setting(
            "ONNX Runtime provider of an .onnx detector: onnxruntime (CPU), onnxruntime-cuda or "
            "onnxruntime-tensorrt.",
            name="detector_backend",
            choices=ONNX_DETECTOR_BACKENDS,
            ros=True,
        ),
    )
    layout: str | None = field(
        default=None,
        metadata=setting(
            "Read an .onnx detector's output as this layout instead of the one told apart from its graph "
            "(docs/runtime.md).",
            name="detector_layout",
            choices=LAYOUTS,
        ),
    )

    def __post_init__(self) -> None:
        spec = self.detector
        if isinstance(spec, str):
            spec = spec.strip() or None
        elif spec is not None and not isinstance(spec, Path):
            raise InputError(f"detector: expected a name or an .onnx / .engine path, got {spec!r}")
        object.__setattr__(self, "detector", spec)
        if self.layout is not None and self.layout not in LAYOUTS:
            raise InputError(f"detector_layout: expected one of {', '.join(LAYOUTS)}, got {self.layout!r}")

    def open(self, max_people: int | None = None) -> Detector:
        """The detector (not activated), keeping at most ``max_people`` boxes per frame (the most confident;
        :data:`~pairedge.runtime.detectors.postprocess.MAX_DETECTIONS` when None), read in :attr:`layout`
        when it is given.

        Raises:
            InputError: no detector is configured; a layout forced on a detector that has none to choose
                (HOG, a TensorRT engine: its manifest records the layout it was built with).
        """
        if self.detector is None:
            raise InputError("no person detector configured (detector is empty)")
        spec = str(self.detector)
        is_hog = spec.lower() == HOG
        cls = detector_class(HOG if is_hog else self.backend)
        cap = min(max_people or MAX_DETECTIONS, MAX_DETECTIONS)
        if self.layout is not None and (is_hog or spec.lower().endswith(ENGINE_SUFFIX)):
            what = (
                "OpenCV's HOG detector has no output layout"
                if is_hog
                else "a TensorRT engine reads the layout its manifest records: rebuild it from the ONNX"
            )
            raise InputError(f"--detector-layout: {what}")
        extra = {"layout": self.layout} if self.layout is not None else {}
        return open_detector(self.detector, self.backend, cls.options_type(max_detections=cap, **extra))
