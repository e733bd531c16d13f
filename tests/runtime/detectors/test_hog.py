"""The zero-download default: OpenCV's HOG people detector on a real PETS 2009 frame."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.runtime.detectors import open_detector
from pairedge.runtime.detectors.hog import HogDetector

REASON = HogDetector.unavailable_reason()


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) IoU of ``x y w h`` boxes."""
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 0] + a[:, None, 2], b[None, :, 0] + b[None, :, 2])
    y2 = np.minimum(a[:, None, 1] + a[:, None, 3], b[None, :, 1] + b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    return inter / (a[:, None, 2] * a[:, None, 3] + b[None, :, 2] * b[None, :, 3] - inter)


@pytest.mark.skipif(REASON is not None, reason=str(REASON))
def test_hog_finds_people_on_a_pets_frame(shared_data) -> None:
    import cv2

    pets = shared_data / "pets09_s2l1"
    cap = cv2.VideoCapture(str(pets / "vtest.avi"))
    ok, frame = cap.read()
    cap.release()
    assert ok
    gt = np.loadtxt(pets / "mot15" / "gt" / "gt.txt", delimiter=",")
    truth = gt[gt[:, 0] == 1][:, 2:6]  # MOT frame 1 = video frame 0
    with open_detector("hog") as det:
        found = det.detect(frame)
    assert (found.track_ids == -1).all() and len(found) <= det.options.max_detections
    matched = (iou(truth, found.boxes) >= 0.5).any(axis=1)
    assert matched.sum() >= len(truth) // 2, (matched.sum(), len(truth))
    hits = (iou(found.boxes, truth) >= 0.5).any(axis=1)
    assert hits.mean() >= 0.4, (hits.sum(), len(found))


@pytest.mark.skipif(REASON is None, reason="this OpenCV has HOGDescriptor")
def test_hog_missing_is_one_line() -> None:
    from pairedge.core.errors import BackendError

    with pytest.raises(BackendError, match="HOGDescriptor") as info:
        open_detector("hog")
    assert "\n" not in str(info.value)
