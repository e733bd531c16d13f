"""Shared helper of the benchmarks that judge tracker output against ground truth: box-to-person matching."""

from __future__ import annotations

import numpy as np


def match_to_truth(boxes: np.ndarray, truth_boxes: np.ndarray, truth_ids: np.ndarray, min_iou: float = 0.5):
    """Ground-truth id (or -1) of each box (N, 4) ``x y w h`` by Hungarian assignment on IoU >=
    ``min_iou``."""
    from scipy.optimize import linear_sum_assignment

    out = np.full(len(boxes), -1, np.int64)
    if not len(boxes) or not len(truth_boxes):
        return out
    a, b = boxes[:, None, :].astype(np.float64), truth_boxes[None, :, :].astype(np.float64)
    iw = np.clip(
        np.minimum(a[..., 0] + a[..., 2], b[..., 0] + b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None
    )
    ih = np.clip(
        np.minimum(a[..., 1] + a[..., 3], b[..., 1] + b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None
    )
    inter = iw * ih
    iou = inter / (a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter)
    rows, cols = linear_sum_assignment(-iou)
    ok = iou[rows, cols] >= min_iou
    out[rows[ok]] = truth_ids[cols[ok]]
    return out
