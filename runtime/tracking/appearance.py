"""The colour appearance of a person box: what tells two people apart when their boxes overlap.

A box's appearance is two hue-saturation histograms (8 hue x 3 saturation bins), of the upper and the lower
half of its inner part (the middle 60 % of its width, 15 % to 85 % of its height: the torso and the legs,
mostly without background), each normalised to sum 1, square-rooted and the pair scaled to unit length, so
the dot product of two appearances is their Bhattacharyya coefficient (1 = the same colours, 0 = none
shared). About 20 us a box on a 2 GHz core (OpenCV's ``cvtColor`` and ``calcHist`` on the crop).
"""

from __future__ import annotations

import cv2
import numpy as np

#: Length of one appearance vector.
SIZE = 48
_BINS = (8, 3)
_RANGES = (0, 180, 0, 256)


def embed(frame: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """(N, :data:`SIZE`) float32 unit appearances of boxes (N, 4) ``x y w h`` in an (H, W, 3) uint8 BGR frame;
    a zero row for a box too small or outside the frame."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    out = np.zeros((len(b), SIZE), np.float32)
    height, width = frame.shape[:2]
    x0 = np.clip(b[:, 0] + 0.2 * b[:, 2], 0, width).astype(np.int64)
    x1 = np.clip(b[:, 0] + 0.8 * b[:, 2], 0, width).astype(np.int64)
    y0 = np.clip(b[:, 1] + 0.15 * b[:, 3], 0, height).astype(np.int64)
    y1 = np.clip(b[:, 1] + 0.85 * b[:, 3], 0, height).astype(np.int64)
    for i in np.flatnonzero((x1 - x0 >= 2) & (y1 - y0 >= 4)):
        hsv = cv2.cvtColor(frame[y0[i] : y1[i], x0[i] : x1[i]], cv2.COLOR_BGR2HSV)
        mid = (y1[i] - y0[i]) // 2
        halves = [
            cv2.calcHist([part], [0, 1], None, list(_BINS), list(_RANGES)).reshape(-1)
            for part in (hsv[:mid], hsv[mid:])
        ]
        v = np.sqrt(np.concatenate([h / max(float(h.sum()), 1.0) for h in halves]))
        out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
    return out
