"""Vectorised JRDB-PAR kernels: sample-averaged multi-label P/R/F1, Half-criterion group matching, social
sums.

Arithmetic follows the official code (RuizeHan/PAR: ``metrics.py``, ``my_utils/group_detection_PRF.py``,
scikit-learn ``precision_recall_fscore_support(average="samples")``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def sample_prf(pred: np.ndarray, true: np.ndarray) -> tuple[float, float, float]:
    """Sample-averaged multi-label precision, recall and F1 (scikit-learn ``average="samples"``).

    Args:
        pred: (S, C) bool predicted labels; true: (S, C) bool true labels. S > 0.

    Returns:
        Means over samples of tp/|pred|, tp/|true| and 2 tp/(|pred| + |true|); a sample whose
        denominator is zero (empty prediction, empty truth, or both) scores 0 (``zero_division=0``).
    """
    tp = (pred & true).sum(axis=1).astype(np.float64)
    n_pred = pred.sum(axis=1).astype(np.float64)
    n_true = true.sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n_pred > 0, tp / n_pred, 0.0)
        r = np.where(n_true > 0, tp / n_true, 0.0)
        f = np.where(n_pred + n_true > 0, 2 * tp / (n_pred + n_true), 0.0)
    return float(p.mean()), float(r.mean()), float(f.mean())


def half_matches(
    gold_group: np.ndarray, pred_group: np.ndarray, gold_size: np.ndarray, pred_size: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Matched (gold group, predicted group) pairs under the Half criterion.

    Args:
        gold_group: (N,) int64 per person: index of its ground-truth group (>= 2 members) or -1.
        pred_group: (N,) int64 per person (same rows): index of its predicted group or -1.
        gold_size: (G,) int64 member counts; pred_size: (P,) int64 member counts.

    Returns:
        (M,) int64 gold and (M,) int64 predicted group indices with ``|G ∩ P| / max(|G|, |P|) > 1/2``
        (the official 2-vs-2 rule "identical sets" is the same condition). Groups are disjoint, so every
        group is in at most one pair.
    """
    both = (gold_group >= 0) & (pred_group >= 0)
    n_pred = max(len(pred_size), 1)
    keys, inter = np.unique(gold_group[both] * n_pred + pred_group[both], return_counts=True)
    g, p = keys // n_pred, keys % n_pred
    hit = 2 * inter > np.maximum(gold_size[g], pred_size[p])
    return g[hit], p[hit]


@dataclass(frozen=True)
class SocialSums:
    """Per-matched-pair sums of the social-activity scores (before division)."""

    precision: float
    recall: float
    f1: float
    pairs: int
    pairs_both_empty: int


def social_sums(pred: np.ndarray, true: np.ndarray, *, empty_pair_f1: float = float("nan")) -> SocialSums:
    """Sum pair precision, recall and Dice F1 over matched group pairs, as ``social_activity_eval``.

    Args:
        pred: (M, 32) bool labels of the matched predicted groups; true: (M, 32) bool, same pairs.
        empty_pair_f1: F1 of a pair whose two label sets are both empty. The official code computes
            ``2*0 / 0`` with numpy, i.e. NaN (which makes the whole sum NaN); the corrected variant uses 0.

    Returns:
        precision adds tp/|pred| only where |pred| > 0, recall adds tp/|true| only where |true| > 0,
        F1 adds 2 tp / (|pred| + |true|).
    """
    tp = (pred & true).sum(axis=1).astype(np.float64)
    n_pred = pred.sum(axis=1).astype(np.float64)
    n_true = true.sum(axis=1).astype(np.float64)
    empty = (n_pred + n_true) == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n_pred > 0, tp / n_pred, 0.0)
        r = np.where(n_true > 0, tp / n_true, 0.0)
        f = np.where(empty, empty_pair_f1, 2 * tp / (n_pred + n_true))
    return SocialSums(float(p.sum()), float(r.sum()), float(f.sum()), len(tp), int(empty.sum()))


def safe_div(num: float, den: float) -> float:
    """``num / den``, or 0 when ``den == 0`` (the official ``safed`` helper of group detection)."""
    return 0.0 if den == 0 else num / den
