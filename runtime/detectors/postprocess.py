"""The one place where a detector's raw boxes become a frame's people: person filter, threshold, NMS, the
cap, clipping.

Every detector goes through here (network detectors after :mod:`pairedge.runtime.detectors.preprocess` fitted
the frame into their input and mapped their boxes back), in this order:

1. :func:`select`: keep the person class (``person_class``, COCO's 0 by default; None keeps every class),
   drop scores below ``score_threshold``, suppress overlaps with OpenCV's ``cv2.dnn.NMSBoxes`` at IoU
   ``nms_iou`` (class-agnostic: every kept box is a person), keep at most ``max_detections`` (the most
   confident).
2. :func:`to_detections`: clip to the frame, drop boxes that end up empty or non-finite, and return
   :class:`~pairedge.core.types.Detections` in ``x y w h`` pixels with track ids -1 (the built-in tracker
   assigns identities).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.types import Detections

#: The ceiling of ``max_detections``: the largest ``--max-people`` that ``pairedge run`` accepts, so that a
#: detector never hands the pipeline more boxes than it could be told to keep.
MAX_DETECTIONS = 100_000


@dataclass(frozen=True)
class DetectorOptions:
    """What every detector keeps of its raw boxes (:func:`select`).

    Attributes:
        score_threshold: drop detections scoring below this (the model's confidence; for HOG, the SVM margin).
            0.1 is the built-in tracker's ``low_score``: boxes between it and the tracker's ``high_score``
            continue tracks of people already seen (a partly hidden person scores low) but start none.
        nms_iou: suppress a box overlapping a more confident one at IoU above this.
        person_class: the class id kept (COCO's person = 0); None keeps every class.
        max_detections: at most this many detections per frame (the most confident), 1 to
            :data:`MAX_DETECTIONS`.
    """

    score_threshold: float = 0.1
    nms_iou: float = 0.45
    person_class: int | None = 0
    max_detections: int = 300

    def __post_init__(self) -> None:
        for name in ("score_threshold", "nms_iou"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
                raise InputError(f"{name}: expected a finite number, got {value!r}")
        if not 0.0 < self.nms_iou <= 1.0:
            raise InputError(f"nms_iou: expected a value in (0, 1], got {self.nms_iou!r}")
        cls = self.person_class
        if cls is not None and (isinstance(cls, bool) or not isinstance(cls, int) or cls < 0):
            raise InputError(f"person_class: expected a class id >= 0 or None (every class), got {cls!r}")
        cap = self.max_detections
        if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_DETECTIONS:
            raise InputError(f"max_detections: expected an integer in [1, {MAX_DETECTIONS}], got {cap!r}")


def cxcywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    """(N, 4) ``cx cy w h`` -> (N, 4) float32 ``x1 y1 x2 y2``."""
    b = np.asarray(boxes, np.float32)
    half = b[:, 2:4] / 2
    return np.concatenate([b[:, 0:2] - half, b[:, 0:2] + half], axis=1)


def select(
    xyxy: np.ndarray, scores: np.ndarray, classes: np.ndarray | None, options: DetectorOptions
) -> np.ndarray:
    """Indices of the boxes a frame keeps, most confident first (see the module docstring).

    Args:
        xyxy: (N, 4) float32 ``x1 y1 x2 y2``.
        scores: (N,) float32.
        classes: (N,) integer class ids, or None (every box is a person).
        options: threshold, NMS IoU, person class, cap.

    Returns:
        (K,) int64 indices into the N boxes, K <= ``options.max_detections``.
    """
    import cv2

    scores = np.asarray(scores, np.float32).reshape(-1)
    keep = np.isfinite(scores) & (scores >= options.score_threshold) & np.isfinite(xyxy).all(axis=1)
    if classes is not None and options.person_class is not None:
        keep &= np.asarray(classes).reshape(-1) == options.person_class
    candidates = np.flatnonzero(keep)
    if not len(candidates):
        return np.zeros(0, np.int64)
    b = xyxy[candidates].astype(np.float64)
    rects = np.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], axis=1)
    picked = cv2.dnn.NMSBoxes(
        rects.tolist(),
        scores[candidates].astype(float).tolist(),
        float(options.score_threshold),
        float(options.nms_iou),
        top_k=int(options.max_detections),
    )
    picked = np.asarray(picked, np.int64).reshape(-1)
    order = np.argsort(-scores[candidates][picked], kind="stable")
    return candidates[picked[order]][: options.max_detections]


def to_detections(xyxy: np.ndarray, scores: np.ndarray, frame_size: tuple[int, int]) -> Detections:
    """Frame-pixel ``x1 y1 x2 y2`` boxes (N, 4) and scores (N,) -> :class:`Detections` (``x y w h``, clipped
    to the frame of (height, width), ids -1); boxes empty after clipping are dropped."""
    h, w = frame_size
    b = np.asarray(xyxy, np.float32).reshape(-1, 4).copy()
    b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0, w)
    b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0, h)
    wh = b[:, 2:4] - b[:, 0:2]
    ok = (wh > 0).all(axis=1)
    boxes = np.concatenate([b[ok, 0:2], wh[ok]], axis=1)
    return Detections.from_arrays(boxes, None, np.asarray(scores, np.float32).reshape(-1)[ok])
