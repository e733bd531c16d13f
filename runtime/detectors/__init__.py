"""Person detectors: a frame in, :class:`~pairedge.core.types.Detections` out (``x y w h`` pixels, ids -1).

:func:`open_detector` creates one by name: ``"hog"`` (OpenCV's built-in HOG people detector, no weights
file) or an exported ``.onnx`` detector (Ultralytics YOLOv8/11, YOLOX, DETR / RT-DETR; see
:mod:`~pairedge.runtime.detectors.layouts`) on ONNX Runtime. Letterbox, person filter, threshold, NMS and
the per-frame cap live in :mod:`~pairedge.runtime.detectors.postprocess`.
"""

from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.postprocess import DetectorOptions
from pairedge.runtime.detectors.registry import DETECTORS, available_detectors, open_detector

__all__ = ["DETECTORS", "Detector", "DetectorOptions", "available_detectors", "open_detector"]
