"""Box geometry shared by the runtime's tracker and the simulator's detector: IoU and greedy suppression.

Boxes are ``x y w h`` in pixels, as everywhere in pairedge.
"""

from __future__ import annotations

import numpy as np


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` (T, 4) with every box in ``b`` (N, 4), both ``x y w h``; (T, N) float64."""
    ax0, ay0, ax1, ay1 = a[:, 0:1], a[:, 1:2], a[:, 0:1] + a[:, 2:3], a[:, 1:2] + a[:, 3:4]
    bx0, by0, bx1, by1 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    iw = np.clip(np.minimum(ax1, bx1) - np.maximum(ax0, bx0), 0, None)
    ih = np.clip(np.minimum(ay1, by1) - np.maximum(ay0, by0), 0, None)
    inter = iw * ih
    union = a[:, 2:3] * a[:, 3:4] + b[:, 2] * b[:, 3] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def nms_keep(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """(N,) bool: boxes kept by greedy non-maximum suppression at ``iou`` (higher score wins, then lower
    index)."""
    n = len(boxes)
    keep = np.ones(n, bool)
    if n < 2:
        return keep
    overlap = iou_matrix(boxes, boxes)
    order = np.argsort(-scores, kind="stable")
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    # i suppresses j when they overlap and i ranks higher; resolve in rank order (few candidates remain)
    beats = (overlap > iou) & (rank[:, None] < rank[None, :])
    for i in order[beats[order].any(axis=1)].tolist():
        if keep[i]:
            keep &= ~beats[i]
    return keep
