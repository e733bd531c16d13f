"""The zero-download default detector: OpenCV's HOG + linear SVM people detector (Dalal and Triggs).

No weights file: the SVM ships inside OpenCV (``cv2.HOGDescriptor_getDefaultPeopleDetector``). Its window
is 64 x 128 pixels, so people shorter than about 100 pixels are missed unless the frame is enlarged first
(``upscale``). Raw windows (OpenCV's own grouping off) go through the shared NMS of
:mod:`pairedge.runtime.detectors.postprocess`; scores are SVM margins, not probabilities. Each window is
shrunk to the person inside it the way OpenCV's ``peopledetect`` sample does (x + 10 %, width 80 %,
y + 7 %, height 80 %). Speed and recall on PETS 2009 S2.L1: ``benchmarks/bench_detector.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.errors import BackendError, InputError
from pairedge.runtime.detectors.base import Detector
from pairedge.runtime.detectors.postprocess import DetectorOptions


@dataclass(frozen=True)
class HogOptions(DetectorOptions):
    """HOG settings beside the shared ones.

    Attributes:
        score_threshold: the least SVM margin kept (0.6 and ``upscale`` 1.5 were chosen on every 40th frame of
            PETS S2.L1: upscale 1 finds 28 % of the people, 1.5 73 % at 2.4x the time, 2.0 80 % at 4.5x).
        upscale: the frame is resized by this factor before detection (>= 1 finds smaller people, at
            about upscale squared the cost).
        win_stride: window step in pixels (of the enlarged frame).
        scale: pyramid step between scales (> 1).
    """

    score_threshold: float = 0.6
    nms_iou: float = 0.4
    upscale: float = 1.5
    win_stride: int = 8
    scale: float = 1.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.upscale, int | float) or not 0.25 <= self.upscale <= 4:
            raise InputError(f"upscale: expected a factor in [0.25, 4], got {self.upscale!r}")
        if (
            isinstance(self.win_stride, bool)
            or not isinstance(self.win_stride, int)
            or not 1 <= self.win_stride <= 64
        ):
            raise InputError(f"win_stride: expected an integer in [1, 64], got {self.win_stride!r}")
        if not isinstance(self.scale, int | float) or not 1.01 <= self.scale <= 2:
            raise InputError(f"scale: expected a pyramid step in [1.01, 2], got {self.scale!r}")


class HogDetector(Detector):
    """OpenCV's default HOG people detector (CPU, no weights file).

    Args:
        options: :class:`HogOptions`; None for the defaults.
    """

    name = "hog"
    options_type = HogOptions

    def __init__(self, options: HogOptions | None = None) -> None:
        super().__init__(options)
        self._hog: Any = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        import cv2

        if not hasattr(cv2, "HOGDescriptor"):
            return (
                f"OpenCV {cv2.__version__} has no HOGDescriptor (OpenCV 5 moved it out of the main module); "
                "pairedge depends on opencv-contrib-python-headless, which has it: pip uninstall "
                "opencv-python-headless && pip install opencv-contrib-python-headless, or pass --detector "
                "MODEL.onnx"
            )
        return None

    def _activate(self) -> None:
        import cv2

        reason = self.unavailable_reason()
        if reason is not None:
            raise BackendError(f"the HOG people detector cannot run here: {reason}")
        hog = cv2.HOGDescriptor()
        hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
        self._hog = hog

    def _deactivate(self) -> None:
        self._hog = None

    def _detect(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, None]:
        import cv2

        o: Any = self.options
        h, w = image.shape[:2]
        big = image
        if o.upscale != 1:
            big = cv2.resize(image, (max(1, round(w * o.upscale)), max(1, round(h * o.upscale))))
        if big.shape[0] < 128 or big.shape[1] < 64:  # smaller than one window
            return np.zeros((0, 4), np.float32), np.zeros(0, np.float32), None
        try:
            rects, weights = self._hog.detectMultiScale(
                big,
                hitThreshold=0.0,
                winStride=(o.win_stride, o.win_stride),
                padding=(8, 8),
                scale=o.scale,
                groupThreshold=0,
            )
        except cv2.error as exc:
            raise BackendError(
                f"{self!r}: OpenCV's HOG failed ({str(exc).strip().splitlines()[-1]})"
            ) from None
        if len(rects) == 0:
            return np.zeros((0, 4), np.float32), np.zeros(0, np.float32), None
        r = np.asarray(rects, np.float32).reshape(-1, 4) / np.float32(big.shape[1] / w)
        x, y = r[:, 0] + 0.1 * r[:, 2], r[:, 1] + 0.07 * r[:, 3]
        xyxy = np.stack([x, y, x + 0.8 * r[:, 2], y + 0.8 * r[:, 3]], axis=1).astype(np.float32)
        return xyxy, np.asarray(weights, np.float32).reshape(-1), None

    def describe(self) -> str:
        o: Any = self.options
        return (
            f"OpenCV HOG people detector (no weights file; upscale {o.upscale:g}, stride {o.win_stride}, "
            f"pyramid {o.scale:g}): SVM margin >= {o.score_threshold:g}, NMS IoU {o.nms_iou:g}, at most "
            f"{o.max_detections} per frame"
        )

    def __repr__(self) -> str:
        return "HogDetector()"
