"""Integral images (summed-area tables): O(1) sums over axis-aligned pixel rectangles.

A pixel rectangle is ``(x0, y0, x1, y1)`` int64, half-open: columns ``[x0, x1)``, rows ``[y0, y1)``, already
clipped to the image (so ``0 <= x0 <= x1 <= w``); an empty rectangle has ``x0 == x1`` or ``y0 == y1``.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np


def integral(planes: Sequence[np.ndarray]) -> np.ndarray:
    """Summed-area tables of image planes, accumulated in float64 (``cv2.integral``).

    Args:
        planes: C arrays of shape (h, w), each uint8, float32 or float64 (other dtypes are converted to
            float64).

    Returns:
        (C, h + 1, w + 1) float64 tables ``S`` with ``S[c, y, x] = sum(planes[c][:y, :x])``.
    """
    h, w = planes[0].shape
    out = np.empty((len(planes), h + 1, w + 1), np.float64)
    for c, plane in enumerate(planes):
        if plane.dtype not in (np.uint8, np.float32, np.float64):
            plane = plane.astype(np.float64)
        cv2.integral(np.ascontiguousarray(plane), out[c], sdepth=cv2.CV_64F)
    return out


def pixel_rects(boxes: np.ndarray, scale: float, width: int, height: int) -> np.ndarray:
    """Pixel rectangles of boxes: ``[int(x*s), int((x+w)*s)) x [int(y*s), int((y+h)*s))`` clipped.

    ``int`` truncates toward zero, as Python's ``int()`` does (the released liang2026 code's convention).

    Args:
        boxes: (N, 4) float, ``x y w h`` in full-image pixels.
        scale: factor from full-image pixels to the table's pixels.
        width, height: size of the image the table was built from.

    Returns:
        (N, 4) int64 ``x0 y0 x1 y1`` with ``0 <= x0 <= x1 <= width`` and ``0 <= y0 <= y1 <= height``.
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    x0 = np.trunc(b[:, 0] * scale)
    y0 = np.trunc(b[:, 1] * scale)
    x1 = np.trunc((b[:, 0] + b[:, 2]) * scale)
    y1 = np.trunc((b[:, 1] + b[:, 3]) * scale)
    # np.minimum(np.maximum(...)) is np.clip without its Python-level dispatch (this runs every frame)
    x0 = np.minimum(np.maximum(x0, 0), width)
    x1 = np.minimum(np.maximum(x1, x0), width)
    y0 = np.minimum(np.maximum(y0, 0), height)
    y1 = np.minimum(np.maximum(y1, y0), height)
    return np.stack([x0, y0, x1, y1], axis=1).astype(np.int64)


def intersect(ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
    """Intersection of pixel rectangles, row by row; empty ones come out with ``x0 == x1`` or ``y0 == y1``.

    Args:
        ra, rb: (M, 4) int64 ``x0 y0 x1 y1``.

    Returns:
        (M, 4) int64.
    """
    x0 = np.maximum(ra[:, 0], rb[:, 0])
    y0 = np.maximum(ra[:, 1], rb[:, 1])
    x1 = np.maximum(np.minimum(ra[:, 2], rb[:, 2]), x0)
    y1 = np.maximum(np.minimum(ra[:, 3], rb[:, 3]), y0)
    return np.stack([x0, y0, x1, y1], axis=1)


def rect_area(rects: np.ndarray) -> np.ndarray:
    """(M,) int64 pixel counts of (M, 4) rectangles."""
    return (rects[:, 2] - rects[:, 0]) * (rects[:, 3] - rects[:, 1])


def rect_sums(table: np.ndarray, rects: np.ndarray) -> np.ndarray:
    """Per-channel sums over rectangles, four lookups each.

    Args:
        table: (C, h + 1, w + 1) float64 from :func:`integral`.
        rects: (M, 4) int64 clipped rectangles.

    Returns:
        (M, C) float64.
    """
    x0, y0, x1, y1 = rects[:, 0], rects[:, 1], rects[:, 2], rects[:, 3]
    return (table[:, y1, x1] - table[:, y0, x1] - table[:, y1, x0] + table[:, y0, x0]).T


def union_sums(table: np.ndarray, ra: np.ndarray, rb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sums and pixel counts over the union of two rectangles per row: ``A + B - (A n B)``.

    Returns:
        sums: (M, C) float64; counts: (M,) int64.
    """
    ri = intersect(ra, rb)
    sums = rect_sums(table, ra) + rect_sums(table, rb) - rect_sums(table, ri)
    counts = rect_area(ra) + rect_area(rb) - rect_area(ri)
    return sums, counts
