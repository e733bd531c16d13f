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
from pairedge.core.errors import InputError

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
    iw = np.clip(np.minimum(aa[..., 0] + aa[..., 2], bb[..., 0] + bb[..., 2]) - np.maximum(aa[..., 0], bb[..., 0]), 0, None)
    ih = np.clip(np.minimum(aa[..., 1] + aa[..., 3], bb[..., 1] + bb[..., 3]) - np.maximum(aa[..., 1], bb[..., 1]), 0, None)
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
        raise InputError(f"{what} boxes: {len(arr)} in one frame, more than the {MAX_BOXES} box matching takes")
    if not np.isfinite(arr).all():
        raise InputError(f"{what} boxes: expected finite numbers, got NaN or inf in {int((~np.isfinite(arr).all(1)).sum())} box(es)")
    if (arr[:, 2:] < 0).any():
        raise InputError(f"{what} boxes: expected width and height >= 0")
    return arr


def max_weight_assignment(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact one-to-one assignment of rows to columns maximising the summed ``weight`` (N, M), weights >= 0.

    Every row of the shorter side is assigned (a zero weight is a dummy the caller drops). Hungarian
    algorithm with potentials (shortest augmenting paths), O(n^2 m) with the inner loop in numpy.

    Returns:
        rows, cols: (K,) int64 with K = min(N, M), rows ascending.
    """
    w = np.asarray(weight, np.float64)
    n, m = w.shape
    if n == 0 or m == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    flip = n > m
    cost = -(w.T if flip else w)
    rows, cols = _hungarian(cost)
    if flip:
        rows, cols = cols, rows
    order = np.argsort(rows, kind="stable")
    return rows[order], cols[order]


def _hungarian(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-cost assignment of every row of ``cost`` (n, m), n <= m (1-based potentials internally)."""
    n, m = cost.shape
    u, v = np.zeros(n + 1), np.zeros(m + 1)
    p = np.zeros(m + 1, np.int64)  # p[j]: the row (1-based) holding column j; 0 = free
    way = np.zeros(m + 1, np.int64)
    for i in range(1, n + 1):
        p[0], j0 = i, 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            cur = cost[i0 - 1] - u[i0] - v[1:]
            free = ~used[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1  # the first minimum: ties go to the lower column
            delta = cand[j1 - 1]
            u[p[used]] += delta
            v[used] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    cols = np.flatnonzero(p[1:])
    return p[1:][cols] - 1, cols.astype(np.int64)


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
