"""HOTA (Luiten et al., IJCV 2021), as TrackEval computes it (``trackeval/metrics/hota.py``).

Similarity of a predicted and a true box: their IoU. For every localisation threshold
``alpha`` in 0.05, 0.10, ..., 0.95 (19 values):

1. **Global alignment.** Over the whole sequence, for true id ``i`` and predicted id ``j``,
   ``A(i, j) = P(i, j) / (n_i + m_j - P(i, j))`` where ``n_i`` / ``m_j`` are the frames the ids are present in
   and ``P(i, j)`` sums, over frames, the IoU normalised as in TrackEval: ``S / (row sum + column sum - S)``
   of the frame's (true x predicted) IoU matrix ``S``.
2. **Matching per frame.** One Hungarian assignment on ``A(i, j) * S(i, j)`` (the same for every ``alpha``);
   a matched pair counts at ``alpha`` when its IoU is ``>= alpha`` (less machine epsilon, as TrackEval).
   Counted pairs are TPs; the frame's other true boxes FNs, other predicted boxes FPs.
3. **Scores.** ``DetA = TP / (TP + FN + FP)``; for each true/predicted id pair counted ``c(i, j)`` times,
   ``AssA = sum c(i, j) * c(i, j) / (n_i + m_j - c(i, j)) / TP``; ``HOTA = sqrt(DetA * AssA)``;
   ``LocA`` the mean IoU of the TPs; also ``DetRe``, ``DetPr``, ``AssRe``, ``AssPr``.

The reported values are means over the 19 thresholds (TrackEval's ``HOTA``, ``DetA``, ``AssA``, ``LocA``);
``hota_alpha`` lists HOTA per threshold. A sequence with no box on either side scores as TrackEval's
special cases do (no prediction: HOTA 0, LocA 1; no truth: HOTA 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pairedge.core.errors import InputError
from pairedge.measure.metrics.box_matching import iou_matrix, max_weight_assignment
from pairedge.measure.metrics.pairwise.boxes import FrameBoxes

#: The localisation thresholds HOTA averages over (TrackEval's ``np.arange(0.05, 0.99, 0.05)``).
ALPHAS = np.arange(0.05, 0.99, 0.05)
#: Most true x predicted id pairs the dense alignment matrix may hold (float64: 200 MB).
MAX_ID_PAIRS = 25_000_000
_EPS = np.finfo(float).eps


def hota(pred: Mapping[int, FrameBoxes], gt: Mapping[int, FrameBoxes]) -> dict[str, Any]:
    """HOTA and its parts for tracks already read (frame -> people), see the module docstring.

    Returns:
        ``hota``, ``deta``, ``assa``, ``loca``, ``detre``, ``detpr``, ``assre``, ``asspr`` (floats, means over
        :data:`ALPHAS`) and ``hota_alpha`` (19 floats).

    Raises:
        InputError: more id pairs than :data:`MAX_ID_PAIRS`.
    """
    frames = sorted(set(pred) | set(gt))
    empty = FrameBoxes(np.zeros(0, np.int64), np.zeros((0, 4)))
    gids = np.unique(np.concatenate([gt[f].ids for f in gt] or [np.zeros(0, np.int64)]))
    pids = np.unique(np.concatenate([pred[f].ids for f in pred] or [np.zeros(0, np.int64)]))
    n_gt = sum(len(gt[f].ids) for f in gt)
    n_pred = sum(len(pred[f].ids) for f in pred)
    if n_gt == 0 or n_pred == 0:
        return _degenerate()
    if len(gids) * len(pids) > MAX_ID_PAIRS:
        raise InputError(
            f"HOTA: {len(gids)} true x {len(pids)} predicted ids, more than {MAX_ID_PAIRS:,} pairs"
        )
    per_frame = []  # (true index, predicted index, IoU matrix) of each frame
    potential = np.zeros((len(gids), len(pids)))
    gt_count, pred_count = np.zeros(len(gids)), np.zeros(len(pids))
    for f in frames:
        t, p = gt.get(f, empty), pred.get(f, empty)
        ti, pi = np.searchsorted(gids, t.ids), np.searchsorted(pids, p.ids)
        sim = iou_matrix(t.boxes, p.boxes)  # (T, P)
        denom = sim.sum(0)[None, :] + sim.sum(1)[:, None] - sim
        norm = np.zeros_like(sim)
        ok = denom > _EPS
        norm[ok] = sim[ok] / denom[ok]
        potential[ti[:, None], pi[None, :]] += norm
        gt_count[ti] += 1
        pred_count[pi] += 1
        per_frame.append((ti, pi, sim))
    align = potential / (gt_count[:, None] + pred_count[None, :] - potential)
    k = len(ALPHAS)
    tp, fn, fp, loc = np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
    pairs: list[list[np.ndarray]] = [[] for _ in range(k)]  # matched (true, predicted) index codes per alpha
    for ti, pi, sim in per_frame:
        rows = cols = np.zeros(0, np.int64)
        if len(ti) and len(pi):
            rows, cols = max_weight_assignment(align[ti[:, None], pi[None, :]] * sim)
        matched_sim = sim[rows, cols]
        for a, alpha in enumerate(ALPHAS):
            hit = matched_sim >= alpha - _EPS
            n = int(hit.sum())
            tp[a] += n
            fn[a] += len(ti) - n
            fp[a] += len(pi) - n
            loc[a] += float(matched_sim[hit].sum())
            pairs[a].append(ti[rows[hit]] * len(pids) + pi[cols[hit]])
    deta, assa, assre, asspr = np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
    for a in range(k):
        codes, counts = np.unique(np.concatenate(pairs[a]), return_counts=True)
        g, q, c = codes // len(pids), codes % len(pids), counts.astype(np.float64)
        denom_tp = max(1.0, tp[a])
        assa[a] = float((c * c / np.maximum(1.0, gt_count[g] + pred_count[q] - c)).sum()) / denom_tp
        assre[a] = float((c * c / np.maximum(1.0, gt_count[g])).sum()) / denom_tp
        asspr[a] = float((c * c / np.maximum(1.0, pred_count[q])).sum()) / denom_tp
        deta[a] = tp[a] / max(1.0, tp[a] + fn[a] + fp[a])
    detre = tp / np.maximum(1.0, tp + fn)
    detpr = tp / np.maximum(1.0, tp + fp)
    loca = np.maximum(1e-10, loc) / np.maximum(1e-10, tp)
    h = np.sqrt(deta * assa)
    return _means(h, deta, assa, loca, detre, detpr, assre, asspr)


def _means(
    h: np.ndarray,
    deta: np.ndarray,
    assa: np.ndarray,
    loca: np.ndarray,
    detre: np.ndarray,
    detpr: np.ndarray,
    assre: np.ndarray,
    asspr: np.ndarray,
) -> dict[str, Any]:
    return {
        "hota": float(h.mean()),
        "deta": float(deta.mean()),
        "assa": float(assa.mean()),
        "loca": float(loca.mean()),
        "detre": float(detre.mean()),
        "detpr": float(detpr.mean()),
        "assre": float(assre.mean()),
        "asspr": float(asspr.mean()),
        "hota_alpha": [float(x) for x in h],
    }


def _degenerate() -> dict[str, Any]:
    """TrackEval's special cases, no predicted box (all FN) or no true box (all FP): every score 0, LocA 1."""
    k = len(ALPHAS)
    zero, one = np.zeros(k), np.ones(k)
    return _means(zero, zero, zero, one, zero, zero, zero, zero)
