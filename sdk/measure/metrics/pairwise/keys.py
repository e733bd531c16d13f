"""Integer row keys: turn rows such as ``(frame, id_a, id_b)`` into single int64 keys for set operations.

Matching pairs and group members between a prediction and a ground-truth file is a join on integer rows.
Instead of Python sets, every row becomes one int64 key (equal rows <-> equal keys, consistently across
all the tables passed together), and the join is ``np.intersect1d`` / ``np.searchsorted`` on those keys.
"""

from __future__ import annotations

import math

import numpy as np

#: Mixed-radix keys are used while the key space stays below this bound; otherwise ``np.unique`` ranks rows.
_MAX_KEY_SPACE = 2**62


def row_keys(*tables: np.ndarray) -> list[np.ndarray]:
    """Map the integer rows of several tables to int64 keys shared by all of them.

    Args:
        tables: each ``(M_i, K)`` integer array (same ``K`` for all); ``M_i`` may be 0.

    Returns:
        One ``(M_i,)`` int64 array per table; two rows (in the same or different tables) get the same key
        exactly when they are equal. Keys are ordered like the rows in lexicographic order.
    """
    if not tables:
        return []
    width = tables[0].shape[1]
    mats = [np.asarray(t, dtype=np.int64).reshape(-1, width) for t in tables]
    filled = [m for m in mats if len(m)]
    if not filled:
        return [np.zeros(0, np.int64) for _ in mats]
    lo = np.min([m.min(axis=0) for m in filled], axis=0)
    hi = np.max([m.max(axis=0) for m in filled], axis=0)
    spans = [int(h) - int(lo_) + 1 for h, lo_ in zip(hi, lo, strict=True)]
    if math.prod(spans) < _MAX_KEY_SPACE:
        return [_mixed_radix(m, lo, spans) for m in mats]
    # Huge ids: rank the distinct rows instead (still vectorised, one sort).
    _, inverse = np.unique(np.concatenate(filled), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    out: list[np.ndarray] = []
    start = 0
    for m in mats:
        out.append(inverse[start : start + len(m)])
        start += len(m)
    return out


def _mixed_radix(m: np.ndarray, lo: np.ndarray, spans: list[int]) -> np.ndarray:
    """``(M, K)`` rows -> ``(M,)`` int64 keys in the radix given by ``spans`` (offset by ``lo``)."""
    key = np.zeros(len(m), np.int64)
    for col, span in enumerate(spans):
        key *= span
        key += m[:, col] - lo[col]
    return key


def lookup(sorted_keys: np.ndarray, values: np.ndarray, queries: np.ndarray, missing: int = -1) -> np.ndarray:
    """Dictionary lookup on arrays: for each query key, the value stored under it, or ``missing``.

    Args:
        sorted_keys: ``(K,)`` int64, strictly increasing.
        values: ``(K,)`` int64 values stored under those keys.
        queries: ``(Q,)`` int64 keys to look up.

    Returns:
        ``(Q,)`` int64.
    """
    if len(sorted_keys) == 0:
        return np.full(len(queries), missing, np.int64)
    pos = np.searchsorted(sorted_keys, queries)
    pos = np.minimum(pos, len(sorted_keys) - 1)
    found = sorted_keys[pos] == queries
    return np.where(found, values[pos], missing).astype(np.int64)


def first_duplicate(keys: np.ndarray) -> tuple[int, int] | None:
    """Positions ``(i, j)``, ``i < j``, of the first key that occurs twice (in order of ``j``), or None.

    Args:
        keys: ``(M,)`` int64.
    """
    if len(keys) < 2:
        return None
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    dup = np.flatnonzero(sk[1:] == sk[:-1])
    if len(dup) == 0:
        return None
    # among duplicated runs, report the one whose second occurrence comes first in the input
    second = order[dup + 1]
    k = int(np.argmin(second))
    return int(order[dup[k]]), int(second[k])
