"""Camera ego-motion from a dense flow field, measured on the background (outside every person box).

The flow is sampled on a regular grid (``step`` pixels of the flow image); samples inside any (slightly
enlarged) person box are dropped. Methods:

* ``"median"``: the per-component median of the background flow, a pure translation. Cheapest; exact for a
  panning camera, blind to zoom (forward motion) and roll.
* ``"affine"``: a 4-DoF similarity (rotation, uniform scale, translation) fitted robustly with
  ``cv2.estimateAffinePartial2D`` (RANSAC) on the background samples; falls back to the median when the
  fit fails. Handles forward motion (zoom about the focus of expansion) and roll.
* ``"none"``: identity (static camera).

The result is a (2, 3) float64 matrix ``M`` in **full-image** pixels mapping a static point's position in
the previous frame to its position in the current one; the camera-induced displacement at ``p`` is
``M[:, :2] @ p + M[:, 2] - p``. When fewer than ``min_points`` background samples remain (people fill the
view), all grid samples are used.
"""

from __future__ import annotations

import functools
from typing import Any

import cv2
import numpy as np
from pairedge.core.errors import InputError

METHODS = ("median", "affine", "none")
BOX_MARGIN = 0.1  # boxes are enlarged by this fraction of their size on each side before masking
#: ``cv2.estimateAffinePartial2D``'s options of the ``affine`` fit (threshold in flow pixels); OpenCV's
#: default
#: refinement of the inliers (10 Levenberg-Marquardt iterations) follows the search.
RANSAC: dict[str, Any] = {
    "method": cv2.RANSAC,
    "ransacReprojThreshold": 1.0,
    "maxIters": 500,
    "confidence": 0.99,
}


def identity() -> np.ndarray:
    """(2, 3) float64 identity map."""
    return np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def _grid_inside_boxes(xs: np.ndarray, ys: np.ndarray, boxes: np.ndarray, scale: float) -> np.ndarray:
    """(len(ys), len(xs)) bool: grid point ``(xs[j], ys[i])`` lies in some box enlarged by :data:`BOX_MARGIN`.

    A point is in box ``b`` iff its column is in the box's x range and its row in its y range, so the
    count of boxes covering each point is the matrix product ``in_y.T @ in_x`` of the (boxes, rows) and
    (boxes, columns) 0/1 tables: O(boxes x (rows + columns)) comparisons instead of O(boxes x points).
    """
    b = np.asarray(boxes, dtype=np.float64) * scale
    mx, my = b[:, 2] * BOX_MARGIN, b[:, 3] * BOX_MARGIN
    x0, x1 = b[:, 0] - mx, b[:, 0] + b[:, 2] + mx
    y0, y1 = b[:, 1] - my, b[:, 1] + b[:, 3] + my
    in_x = ((xs[None, :] >= x0[:, None]) & (xs[None, :] < x1[:, None])).astype(np.float32)
    in_y = ((ys[None, :] >= y0[:, None]) & (ys[None, :] < y1[:, None])).astype(np.float32)
    return (in_y.T @ in_x) > 0  # exact: 0/1 products summed over < 2**24 boxes


def background_samples(
    flow: np.ndarray, boxes: np.ndarray, scale: float, step: int, min_points: int
) -> tuple[np.ndarray, np.ndarray]:
    """Grid samples of the flow outside all boxes.

    Args:
        flow: (h, w, 2) float32, pixels of the flow image.
        boxes: (N, 4) float, ``x y w h`` in full-image pixels.
        scale: flow image size / full image size.
        step: grid spacing in flow pixels.
        min_points: below this many background samples, every grid sample is returned.

    Returns:
        points: (P, 2) float32 sample positions ``x, y`` in flow pixels; vectors: (P, 2) float32 flow there.
    """
    ys, xs = grid_axes(flow.shape[0], flow.shape[1], step)
    first = step // 2  # the grid's rows and columns as a strided view (the same samples as np.ix_(ys, xs))
    return grid_background(flow[first::step, first::step], ys, xs, boxes, scale, min_points)


def grid_axes(height: int, width: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the background sample grid of an ``height x width`` flow image: ``step // 2``,
    then every ``step`` pixels. Flow backends that reduce on the device sample the same grid."""
    return np.arange(step // 2, height, step), np.arange(step // 2, width, step)


def grid_background(
    grid: np.ndarray, ys: np.ndarray, xs: np.ndarray, boxes: np.ndarray, scale: float, min_points: int
) -> tuple[np.ndarray, np.ndarray]:
    """Background samples from the flow already sampled on the grid (see :func:`background_samples`).

    Args:
        grid: (len(ys), len(xs), 2) float32 flow at rows ``ys`` and columns ``xs`` (:func:`grid_axes`).
    """
    every = _grid_points(np.asarray(ys, np.int64).tobytes(), np.asarray(xs, np.int64).tobytes())
    if len(boxes):
        keep = np.flatnonzero(~_grid_inside_boxes(xs, ys, boxes, scale).ravel())
        if len(keep) >= min_points:
            # gathered by index straight from the (often strided) grid: a boolean mask over a reshaped copy
            # of it costs ~3x more per frame
            rows, cols = np.divmod(keep, grid.shape[1])
            return every.take(keep, axis=0), grid[rows, cols].astype(np.float32, copy=False)
    return every.copy(), grid.reshape(-1, 2).astype(np.float32)


@functools.lru_cache(maxsize=8)
def _grid_points(ys: bytes, xs: bytes) -> np.ndarray:
    """(len(ys) * len(xs), 2) float32 ``x, y`` of the grid with rows ``ys`` and columns ``xs`` (int64 bytes),
    row by row (``np.meshgrid`` order); cached: a stream samples the same grid every frame (read-only)."""
    gx, gy = np.meshgrid(np.frombuffer(xs, np.int64), np.frombuffer(ys, np.int64))
    points = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)
    points.flags.writeable = False
    return points


def estimate(
    flow: np.ndarray,
    boxes: np.ndarray,
    scale: float,
    method: str = "median",
    step: int = 8,
    min_points: int = 20,
) -> np.ndarray:
    """Camera ego-motion as a (2, 3) float64 map in full-image pixels (see the module docstring)."""
    if method not in METHODS:
        raise InputError(f"ego_motion: expected one of {METHODS}, got {method!r}")
    if method == "none":
        return identity()
    return fit(*background_samples(flow, boxes, scale, step, min_points), scale, method)


def fit(points: np.ndarray, vectors: np.ndarray, scale: float, method: str) -> np.ndarray:
    """Camera ego-motion (2, 3) from background samples ((P, 2) positions and flow, flow pixels)."""
    if method == "none":
        return identity()
    if len(points) == 0:
        return identity()
    m = identity()
    if method == "affine" and len(points) >= 3:
        model, _ = cv2.estimateAffinePartial2D(points, points + vectors, **RANSAC)
        if model is not None and np.isfinite(model).all():
            m = model.astype(np.float64)
            m[:, 2] /= scale  # translation to full-image pixels; rotation/scale are unit-free
            return m
    m[:, 2] = np.median(vectors, axis=0) / scale
    return m


def displacement(ego: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Camera-induced displacement at full-image points: (N, 2) -> (N, 2) float64."""
    p = np.asarray(points, dtype=np.float64)
    return p @ ego[:, :2].T + ego[:, 2] - p
