"""Training-data utilities: sequence-level splits, class-balanced sampling, z-score statistics (numpy only).

The features ``.npz`` format and :class:`FeatureData` live in :mod:`pairedge.core.io.featurefile` (torch-free,
shared with the dataset builders); they are re-exported here.
"""

from __future__ import annotations

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.io.featurefile import FeatureData, load_npz, validate_arrays

__all__ = [
    "FeatureData",
    "balanced_indices",
    "load_npz",
    "split_by_sequence",
    "standardization_stats",
    "validate_arrays",
]


def split_by_sequence(
    groups: np.ndarray,
    y: np.ndarray,
    val_fraction: float = 0.2,
    seed: int = 0,
    candidates: int = 64,
) -> np.ndarray:
    """Boolean (N,) validation mask choosing whole sequences, never single frames.

    Tries ``candidates`` seeded shuffles of the sequence ids; each takes sequences until at least
    ``val_fraction`` of the rows are in validation. Keeps the shuffle whose validation set covers the most
    classes that also remain in training, then the one closest to ``val_fraction``. Deterministic in ``seed``.
    """
    if not 0.0 < val_fraction < 1.0:
        raise InputError(f"val_fraction must be in (0, 1), got {val_fraction}")
    uniq, inverse = np.unique(groups, return_inverse=True)
    if len(uniq) < 2:
        raise InputError(
            f"a sequence-level split needs at least 2 sequences (groups), got {len(uniq)}; "
            "add sequences or give explicit validation data"
        )
    counts = np.bincount(inverse, minlength=len(uniq))
    rng = np.random.default_rng(seed)
    target = val_fraction * len(groups)
    best_key: tuple[int, float] | None = None
    best_mask = np.zeros(len(groups), bool)
    for _ in range(candidates):
        order = rng.permutation(len(uniq))
        cum = np.cumsum(counts[order])
        k = min(int(np.searchsorted(cum, target)) + 1, len(uniq) - 1)
        chosen = np.zeros(len(uniq), bool)
        chosen[order[:k]] = True
        mask = chosen[inverse]
        covered = len(np.intersect1d(np.unique(y[mask]), np.unique(y[~mask])))
        key = (covered, -abs(mask.sum() - target))
        if best_key is None or key > best_key:
            best_key, best_mask = key, mask
    return best_mask


def sequence_folds(groups: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Fold id (N,) int64 in ``[0, k)`` per row: the sequences are PARTITIONED into ``k`` folds.

    Every sequence lands in exactly one fold (so the ``k`` validation sets are disjoint and cover all rows);
    sequences are dealt largest first, after a seeded shuffle, to the fold with the fewest rows so far, which
    balances the folds' sizes. Deterministic in ``seed``.
    """
    uniq, inverse = np.unique(groups, return_inverse=True)
    if not 2 <= k <= len(uniq):
        raise InputError(f"expected 2 <= k <= {len(uniq)} (the number of sequences) folds, got {k}")
    counts = np.bincount(inverse, minlength=len(uniq))
    order = np.random.default_rng(seed).permutation(len(uniq))
    order = order[np.argsort(-counts[order], kind="stable")]
    fold_of = np.zeros(len(uniq), np.int64)
    sizes = np.zeros(k, np.int64)
    for s in order:  # one step per sequence (tens), not per row
        f = int(np.argmin(sizes))
        fold_of[s] = f
        sizes[f] += counts[s]
    return fold_of[inverse]


def balanced_indices(
    y: np.ndarray, num: int, rng: np.random.Generator, groups: np.ndarray | None = None
) -> np.ndarray:
    """(num,) int64 row indices drawn with replacement so every present class is equally likely.

    With ``groups`` (N,) sequence ids, every sequence is also equally likely within a class, so one long
    sequence cannot dominate a class (better generalisation to unseen sequences).
    """
    counts = np.bincount(y)
    weights = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0)[y]
    if groups is not None:
        _, g = np.unique(groups, return_inverse=True)
        cell = y * (g.max() + 1) + g
        _, cell_id, cell_count = np.unique(cell, return_inverse=True, return_counts=True)
        seq_per_class = np.bincount(np.unique(cell) // (g.max() + 1), minlength=len(counts))
        weights = 1.0 / (cell_count[cell_id] * seq_per_class[y])
    return rng.choice(len(y), size=num, replace=True, p=weights / weights.sum()).astype(np.int64)


def standardization_stats(X: np.ndarray, floor: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """(F,) mean and std of the training rows; a (near-)constant feature gets std 1 (it stays centred)."""
    mean = X.mean(axis=0, dtype=np.float64)
    std = X.std(axis=0, dtype=np.float64)
    std = np.where(std < floor, 1.0, std)
    return mean.astype(np.float32), std.astype(np.float32)
