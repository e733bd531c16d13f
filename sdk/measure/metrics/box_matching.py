"""Matching predicted boxes to ground-truth boxes in one frame: the MOT convention.

Predicted and true boxes (``x y w h``, pixels) are matched one-to-one by the Hungarian algorithm on their
IoU: a pair with IoU below ``min_iou`` (0.5, the MOT Challenge / CLEAR MOT threshold) can never be matched,
and among the allowed pairs the assignment maximises the summed IoU (as py-motmetrics and TrackEval do).
It is exact (not greedy): a greedy "best IoU first" pass can leave a box unmatched that the optimum matches.

Ties (two assignments of the same summed IoU) are resolved deterministically: the solver scans columns in
index order and keeps the first minimum, so interchangeable boxes are matched in index order (predicted box
0 to the lowest-index true box it could take). No scipy: this runs in the runtime's dependencies.
"""

from __future__ import annotations

import numpy as np
from pairedge.core.assignment import max_weight_assignment
from pairedge.core.errors import InputError

__all__ = ["MAX_BOXES", "MIN_IOU", "iou_matrix", "match_boxes", "max_weight_assignment"]

#: IoU a predicted and a true box need to be matched (the MOT Challenge convention).
MIN_IOU = 0.5
#: Most boxes on either side of one frame (the exact solver is O(n^2 m)).
MAX_BOXES = 2000


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) float64 IoU of boxes ``a`` (N, 4) and ``b`` (M, 4), ``x y w h``; 0 where a union is empty.

    Raises:
        InputError: a box that is not 4 finite numbers with width and height >= 0.
    """
    a, b = _boxes(a, "predicted"), _boxes(b, "true")
    aa, bb = a[:, None, :], b[None, :, :]
    iw = np.clip(
        np.minimum(aa[..., 0] + aa[..., 2], bb[..., 0] + bb[..., 2]) - np.maximum(aa[..., 0], bb[..., 0]),
        0,
        None,
    )
    ih = np.clip(
        np.minimum(aa[..., 1] + aa[..., 3], bb[..., 1] + bb[..., 3]) - np.maximum(aa[..., 1], bb[..., 1]),
        0,
        None,
    )
    inter = iw * ih
    union = aa[..., 2] * aa[..., 3] + bb[..., 2] * bb[..., 3] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _boxes(x: np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(x, np.float64)
    if arr.size == 0:
        return arr.reshape(0, 4)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise InputError(f"{what} boxes: expected shape (N, 4) x y w h, got {arr.shape}")
    if len(arr) > MAX_BOXES:
        raise InputError(
            f"{what} boxes: {len(arr)} in one frame, more than the {MAX_BOXES} box matching takes"
        )
    if not np.isfinite(arr).all():
        raise InputError(
            f"{what} boxes: expected finite numbers, got NaN or inf in "
            f"{int((~np.isfinite(arr).all(1)).sum())} box(es)"
        )
    if (arr[:, 2:] < 0).any():
        raise InputError(f"{what} boxes: expected width and height >= 0")
    return arr


def match_boxes(pred: np.ndarray, truth: np.ndarray, min_iou: float = MIN_IOU) -> np.ndarray:
    """(N,) int64: for each predicted box (N, 4), the index of its matched true box (M, 4), or -1.

    Hungarian matching on IoU with pairs below ``min_iou`` forbidden (see the module docstring).

    Raises:
        InputError: ``min_iou`` not in (0, 1], or a box that is not finite (NaN / inf) or has a negative size.
    """
    if not isinstance(min_iou, int | float) or not 0.0 < float(min_iou) <= 1.0:
        raise InputError(f"min_iou: expected a number in (0, 1], got {min_iou!r}")
    iou = iou_matrix(pred, truth)
    out = np.full(iou.shape[0], -1, np.int64)
    allowed = np.where(iou >= min_iou, iou, 0.0)
    if not allowed.any():
        return out
    rows, cols = max_weight_assignment(allowed)
    keep = allowed[rows, cols] > 0
    out[rows[keep]] = cols[keep]
    return out
