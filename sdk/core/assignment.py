"""Exact one-to-one assignment (the Hungarian algorithm) in numpy: box matching of the metrics and the
tracker's association share it.

No scipy: this runs in the runtime's dependencies. Ties (two assignments of the same summed weight) are
resolved deterministically: the solver scans columns in index order and keeps the first minimum.
"""

from __future__ import annotations

import numpy as np


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
