"""Vectorised PCP kernels: per-part correctness (loose and strict), detection windows, window matching.

Arithmetic mirrors the official CALVIN MATLAB code (``DirectEvalSegms``, ``detBBFromStickmanBuffy``,
``EvalStickmenMulti``) so that results agree with it, ties included.
"""

from __future__ import annotations

import numpy as np

#: Height / width ratio of the upper-body detection window (``pars.det_hwratio`` for class 'ubf').
DET_HW_RATIO = 0.9
#: IoU a window must exceed (PASCAL criterion), both for detection and for the overlap error.
IOU_THRESHOLD = 0.5


def occluded(sticks: np.ndarray) -> np.ndarray:
    """(..., 4) float -> (...) bool: the stick is four NaN (an occluded part, ``me_isEmptyStick``)."""
    return np.isnan(sticks).all(axis=-1)


def loose_correct(est: np.ndarray, gt: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Loose (Buffy / CALVIN) PCP per part.

    Args:
        est: (..., 4) float64 estimated sticks ``[x1, y1, x2, y2]``; NaN rows = occluded.
        gt: (..., 4) float64 ground-truth sticks, same shape.
        threshold: t; a part is correct when the mean over both endpoints of the parallel error and of
            the perpendicular error, each relative to the ground-truth length, are both ``< t``.

    Returns:
        (...) bool. The estimate is reversed first when its first endpoint is strictly nearer the second
        ground-truth endpoint. A part occluded in both is correct; occluded in one only is wrong.
    """
    est = np.asarray(est, dtype=np.float64)
    gt = np.asarray(gt, dtype=np.float64)
    with np.errstate(all="ignore"):  # NaN / inf (occluded parts, absurd coordinates) compare False
        d_first = np.sqrt((est[..., 0] - gt[..., 0]) ** 2 + (est[..., 1] - gt[..., 1]) ** 2)
        d_second = np.sqrt((est[..., 0] - gt[..., 2]) ** 2 + (est[..., 1] - gt[..., 3]) ** 2)
        flip = d_second < d_first  # MATLAB min() keeps the first index on ties
        e = np.where(flip[..., None], est[..., [2, 3, 0, 1]], est)
        d = e - gt
        gdx = gt[..., 2] - gt[..., 0]
        gdy = gt[..., 3] - gt[..., 1]
        length = np.sqrt(gdx**2 + gdy**2)
        orient = np.arctan(gdy / gdx)  # in [-pi/2, pi/2] ...
        orient = np.where(orient < 0, orient + np.pi, orient)  # ... moved to [0, pi] as XY2COL does
        theta = -orient  # rotate back onto the ground-truth direction
        c, s = np.cos(theta), np.sin(theta)
        par1 = np.abs((c * d[..., 0] - s * d[..., 1]) / length)
        perp1 = np.abs((s * d[..., 0] + c * d[..., 1]) / length)
        par2 = np.abs((c * d[..., 2] - s * d[..., 3]) / length)
        perp2 = np.abs((s * d[..., 2] + c * d[..., 3]) / length)
        ok = ((par1 + par2) / 2 < threshold) & ((perp1 + perp2) / 2 < threshold)
    return ok | (occluded(est) & occluded(gt))


def strict_correct(est: np.ndarray, gt: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Strict (LSP / IIP, Pishchulin et al. 2012) PCP per part.

    Args:
        est: (..., 4) float64 estimated sticks; NaN (missing prediction) is wrong.
        gt: (..., 4) float64 ground-truth sticks.
        threshold: t; correct when **both** endpoints are within ``t * L`` (Euclidean) of their
            ground-truth endpoints, in the given order (no swapping), computed as the official code does:
            ``norm(d) / norm(L) <= t`` (not ``d <= t * L``, which differs in the last bit exactly on the
            threshold). A zero-length ground-truth part is never correct (0 / 0 is NaN there too).

    Returns:
        (...) bool.
    """
    est = np.asarray(est, dtype=np.float64)
    gt = np.asarray(gt, dtype=np.float64)
    with np.errstate(all="ignore"):  # NaN / inf (missing parts, coordinates near 1e308) compare False
        length = np.sqrt((gt[..., 2] - gt[..., 0]) ** 2 + (gt[..., 3] - gt[..., 1]) ** 2)
        d1 = np.sqrt((est[..., 0] - gt[..., 0]) ** 2 + (est[..., 1] - gt[..., 1]) ** 2)
        d2 = np.sqrt((est[..., 2] - gt[..., 2]) ** 2 + (est[..., 3] - gt[..., 3]) ** 2)
        return (d1 / length <= threshold) & (d2 / length <= threshold)


def stickman_windows(sticks: np.ndarray) -> np.ndarray:
    """Upper-body detection windows derived from torso and head (``detBBFromStickmanBuffy``).

    Args:
        sticks: (P, 6, 4) float64 in Buffy part order (0 = torso, 5 = head).

    Returns:
        (P, 4) float64 ``[min_x, min_y, max_x, max_y]``: centre x = mean of the head and torso centres;
        y from the min / max of the two head endpoint y and the torso centre y; width = height / 0.9.
        NaN when torso or head is occluded.
    """
    sticks = np.asarray(sticks, dtype=np.float64)
    head, torso = sticks[:, 5], sticks[:, 0]
    with np.errstate(all="ignore"):  # coordinates near 1e308 overflow to inf, never a detection
        head_c = (head[:, 0:2] + head[:, 2:4]) / 2
        torso_c = (torso[:, 0:2] + torso[:, 2:4]) / 2
        centre_x = (head_c[:, 0] + torso_c[:, 0]) / 2
        ys = np.stack([head[:, 1], head[:, 3], torso_c[:, 1]], axis=1)
        min_y, max_y = ys.min(axis=1), ys.max(axis=1)
        width = np.abs(min_y - max_y) / DET_HW_RATIO
        return np.stack([centre_x - width / 2, min_y, centre_x + width / 2, max_y], axis=1)


def window_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise IoU of ``[min_x, min_y, max_x, max_y]`` windows, (K, 4) x (K, 4) -> (K,).

    Width = max_x - min_x (no +1, as ``all_pairs_bb_iou`` on these windows). NaN for NaN windows or an
    empty union; NaN is never > 0.5.
    """
    with np.errstate(all="ignore"):  # NaN windows and overflowing areas give NaN / inf, never > 0.5
        iw = np.maximum(0.0, np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]))
        ih = np.maximum(0.0, np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]))
        inter = iw * ih
        area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        return inter / (area_a + area_b - inter)


def pairs_within_groups(group_a: np.ndarray, group_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All index pairs ``(i, j)`` with ``group_a[i] == group_b[j]``, ordered by i, then j ascending.

    Args:
        group_a: (A,) int64 group (image) index of each a-item.
        group_b: (B,) int64 group index of each b-item.

    Returns:
        (K,) int64 i and (K,) int64 j.
    """
    order_b = np.argsort(group_b, kind="stable")
    sorted_b = group_b[order_b]
    start = np.searchsorted(sorted_b, group_a, side="left")
    counts = np.searchsorted(sorted_b, group_a, side="right") - start
    i = np.repeat(np.arange(len(group_a), dtype=np.int64), counts)
    offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    j = order_b[np.repeat(start, counts) + offsets]
    return i, j


def overlapping_windows(windows: np.ndarray, image: np.ndarray) -> tuple[int, int] | None:
    """First pair of windows of the same image with IoU > 0.5 (an error in the official code), or None.

    Args:
        windows: (E, 4) float64 estimated windows; image: (E,) int64 image index of each.

    Returns:
        (i, j) global indices with i < j, or None.
    """
    i, j = pairs_within_groups(image, image)
    keep = i < j
    i, j = i[keep], j[keep]
    bad = window_iou(windows[i], windows[j]) > IOU_THRESHOLD
    if not bad.any():
        return None
    k = int(np.flatnonzero(bad)[0])
    return int(i[k]), int(j[k])


def match_first(
    gt_windows: np.ndarray, gt_image: np.ndarray, est_windows: np.ndarray, est_image: np.ndarray
) -> np.ndarray:
    """For each ground-truth person, the first estimate (input order) of its image with IoU > 0.5.

    Args:
        gt_windows: (G, 4) float64; gt_image: (G,) int64 image index.
        est_windows: (E, 4) float64; est_image: (E,) int64 image index (estimates of an image in input order).

    Returns:
        (G,) int64 index into the estimates, -1 when undetected. One estimate may serve several people,
        as in ``EvalStickmenMulti``.
    """
    i, j = pairs_within_groups(gt_image, est_image)
    hit = window_iou(gt_windows[i], est_windows[j]) > IOU_THRESHOLD
    i, j = i[hit], j[hit]
    match = np.full(len(gt_image), -1, dtype=np.int64)
    first_gt, first_pos = np.unique(i, return_index=True)  # pairs are sorted by i then j
    match[first_gt] = j[first_pos]
    return match
