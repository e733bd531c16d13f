"""Per-person pooling of a dense flow field for the ``pairedge`` spec: integral images, O(1) per box.

The contract between flow backends and this spec: a backend returns either a **dense field** ((h, w, 2)
float32; DIS, Farneback, the CPU reference; pooled here on the CPU) or a :class:`PooledFlow` (the CUDA
backend: the same per-box sums and background grid samples, reduced on the GPU). Both give the same
features: :func:`pool_any` and :func:`ego_any` read either form through the same formulas.

Each box (optionally trimmed by ``inset``) is mapped to flow pixels with
``[int(x*s), int((x+w)*s)) x [int(y*s), int((y+h)*s))`` clipped to the flow image; the camera's ego-motion
at the box centre is subtracted; results are normalised by the time step and the box height (body heights
per second).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.features import compiled, egomotion
from pairedge.core.features.base import check_flow
from pairedge.core.features.integral import pixel_rects, rect_area

EPS = 1e-6


@dataclass(frozen=True)
class FlowMotion:
    """Per-person motion from flow. velocity (N, 2) and spread (N,) in heights/s; valid (N,) bool."""

    velocity: np.ndarray
    spread: np.ndarray
    valid: np.ndarray


def pool_flow(
    flow: np.ndarray,
    boxes: np.ndarray,
    scale: float,
    ego: np.ndarray,
    dt: float,
    inset: tuple[float, float] = (0.15, 0.05),
) -> FlowMotion:
    """Ego-compensated mean flow and flow spread inside each box, O(1) per box with integral images.

    Args:
        flow: (h, w, 2) float32 previous -> current, pixels of the flow image (``scale`` x full image).
        boxes: (N, 4) float ``x y w h`` in full-image pixels.
        scale: flow image size / full image size.
        ego: (2, 3) camera motion in full-image pixels (:func:`pairedge.core.features.egomotion.estimate`).
        dt: seconds between the two frames.
        inset: fractions of width / height trimmed on each side of the box before pooling.

    Returns:
        :class:`FlowMotion`; ``velocity = (mean flow / scale - ego displacement at the box centre) / dt / h``,
        ``spread = sqrt(var fx + var fy) / scale / dt / h``; rows whose pooled region is empty are invalid
        (zeros).
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    rects = pool_rects(b, scale, flow.shape[:2], inset)
    return motion_from_moments(b, rects, flow_moments(flow, rects), scale, ego, dt)


def pool_rects(
    boxes: np.ndarray, scale: float, flow_shape: tuple[int, int], inset: tuple[float, float]
) -> np.ndarray:
    """The pixel rectangles :func:`pool_flow` sums over: each box trimmed by ``inset``, mapped to the flow
    image and clipped (:func:`pairedge.core.features.integral.pixel_rects`); NaN boxes give empty ones.

    Args:
        boxes: (N, 4) float ``x y w h`` in full-image pixels; flow_shape: (h, w) of the flow image.

    Returns:
        (N, 4) int64 ``x0 y0 x1 y1``.
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    inner = b.copy()
    inner[:, 0] += b[:, 2] * inset[0]
    inner[:, 1] += b[:, 3] * inset[1]
    inner[:, 2] *= 1 - 2 * inset[0]
    inner[:, 3] *= 1 - 2 * inset[1]
    finite = ~np.isnan(inner).any(axis=1)  # +-inf clip to the image edges, as pixel_rects does
    if not finite.all():
        inner[~finite] = 0.0
    rects = pixel_rects(inner, scale, flow_shape[1], flow_shape[0])
    rects[~finite] = 0
    return rects


def motion_from_moments(
    boxes: np.ndarray, rects: np.ndarray, moments: np.ndarray, scale: float, ego: np.ndarray, dt: float
) -> FlowMotion:
    """:class:`FlowMotion` from per-rectangle sums ``fx, fy, fx^2, fy^2`` ((N, 4) float64) over ``rects``."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    n = rect_area(rects).astype(np.float64)
    valid = n > 0
    s = moments / np.maximum(n, 1.0)[:, None]
    mean = s[:, :2] / scale
    var = np.maximum(s[:, 2:] - s[:, :2] ** 2, 0.0).sum(axis=1) / scale**2
    centres = b[:, :2] + b[:, 2:] / 2
    norm = max(dt, EPS) * np.maximum(b[:, 3], EPS)
    velocity = (mean - egomotion.displacement(ego, centres)) / norm[:, None]
    spread = np.sqrt(var) / norm
    return FlowMotion(np.where(valid[:, None], velocity, 0.0), np.where(valid, spread, 0.0), valid)


#: Above this many boxes, or when the boxes cover more than this fraction of the flow image, one pass of
#: integral images over the whole field is cheaper than summing each box's pixels.
SLICING_MAX_BOXES = 32
SLICING_MAX_COVER = 0.35


def _slice_moments(flow: np.ndarray, rects: np.ndarray) -> np.ndarray:
    """:func:`flow_moments` box by box: OpenCV's per-channel mean and standard deviation of each rectangle
    (accumulated in float64; one call per box instead of a float64 copy of its pixels), turned back into sums
    ``n * mean`` and ``n * (std^2 + mean^2)``; equal to direct float64 sums within a few ulp."""
    out = np.zeros((len(rects), 4), np.float64)
    for i, (x0, y0, x1, y1) in enumerate(rects.tolist()):
        n = (x1 - x0) * (y1 - y0)
        if n > 0:
            mean, std = cv2.meanStdDev(flow[y0:y1, x0:x1])
            mean, std = mean[:, 0], std[:, 0]
            out[i, :2] = n * mean
            out[i, 2:] = n * (std * std + mean * mean)
    return out


def flow_moments(flow: np.ndarray, rects: np.ndarray) -> np.ndarray:
    """Sums of ``fx, fy, fx^2, fy^2`` over pixel rectangles, accumulated in float64.

    With the compiled extension (:mod:`pairedge.core.features.compiled`) the sums are taken directly, box by
    box (cost ~ the boxes' pixels, no Python per box). Without it, the cheaper of two exact methods: per-box
    slicing (cost ~ the boxes' pixels; wins for a few people: 10 people cost ~0.3 ms instead of ~0.7 ms at
    320 x 240, and ~4x less at full resolution) or integral images (cost ~ the whole field; wins for crowds).
    All three agree to float64 rounding.

    Args:
        flow: (h, w, 2) float32.
        rects: (M, 4) int64 clipped ``x0 y0 x1 y1`` (see :func:`pairedge.core.features.integral.pixel_rects`).

    Returns:
        (M, 4) float64.
    """
    if compiled.KERNEL is not None:
        out = np.empty((len(rects), 4), np.float64)
        flow32 = np.ascontiguousarray(flow, np.float32)
        compiled.KERNEL.rect_moments(
            flow32, np.ascontiguousarray(rects, np.int64), out, *flow32.shape[:2], len(rects)
        )
        return out
    h, w = flow.shape[:2]
    cover = float(rect_area(rects).sum()) / max(h * w, 1)
    if len(rects) <= SLICING_MAX_BOXES and cover <= SLICING_MAX_COVER:
        return _slice_moments(flow, rects)
    # one pass for both channels' sums and sums of squares, accumulated in float64 (cv2.integral2)
    sums, squares = cv2.integral2(np.ascontiguousarray(flow), sdepth=cv2.CV_64F, sqdepth=cv2.CV_64F)
    x0, y0, x1, y1 = rects.T
    return np.concatenate([t[y1, x1] - t[y0, x1] - t[y1, x0] + t[y0, x0] for t in (sums, squares)], axis=1)


def pool_flow_reference(
    flow: np.ndarray,
    boxes: np.ndarray,
    scale: float,
    ego: np.ndarray,
    dt: float,
    inset: tuple[float, float] = (0.15, 0.05),
) -> FlowMotion:
    """Straightforward per-box slicing version of :func:`pool_flow` (slow; for tests and benchmarks)."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    n = len(b)
    velocity, spread, valid = np.zeros((n, 2)), np.zeros(n), np.zeros(n, bool)
    fh, fw = flow.shape[:2]
    for i, (x, y, w, h) in enumerate(b):
        x, y, w, h = x + w * inset[0], y + h * inset[1], w * (1 - 2 * inset[0]), h * (1 - 2 * inset[1])
        x0, x1 = int(np.clip(np.trunc(x * scale), 0, fw)), int(np.clip(np.trunc((x + w) * scale), 0, fw))
        y0, y1 = int(np.clip(np.trunc(y * scale), 0, fh)), int(np.clip(np.trunc((y + h) * scale), 0, fh))
        patch = flow[y0:y1, x0:x1].reshape(-1, 2).astype(np.float64)
        if len(patch) == 0:
            continue
        centre = np.array([[b[i, 0] + b[i, 2] / 2, b[i, 1] + b[i, 3] / 2]])
        norm = max(dt, EPS) * max(b[i, 3], EPS)
        velocity[i] = (patch.mean(axis=0) / scale - egomotion.displacement(ego, centre)[0]) / norm
        spread[i] = np.sqrt(patch.var(axis=0).sum()) / scale / norm
        valid[i] = True
    return FlowMotion(velocity, spread, valid)


@dataclass(frozen=True)
class PooledFlow:
    """Flow already reduced to what the ``pairedge`` spec reads (what a fusing backend returns).

    Attributes:
        shape: (h, w) of the flow image the statistics come from; scale: flow image / full image.
        boxes: (N, 4) float64 ``x y w h`` full-image boxes the statistics belong to (the spec's usable rows).
        rects: (N, 4) int64 pooled pixel rectangles (:func:`pool_rects` of ``boxes``).
        moments: (N, 4) float64 sums of ``fx, fy, fx^2, fy^2`` over each rectangle.
        grid_step: spacing of the background grid; grid: (len(ys), len(xs), 2) float32 flow at
            :func:`pairedge.core.features.egomotion.grid_axes`.
    """

    shape: tuple[int, int]
    scale: float
    boxes: np.ndarray
    rects: np.ndarray
    moments: np.ndarray
    grid_step: int
    grid: np.ndarray


def pooled_reference(
    flow: np.ndarray, boxes: np.ndarray, scale: float, inset: tuple[float, float], grid_step: int
) -> PooledFlow:
    """CPU reference of the fused GPU reduction: the :class:`PooledFlow` of a dense field.

    Sums each rectangle's pixels directly in float64 (as the kernel does, one block per box) and samples
    the background grid. Non-finite flow vectors count as zero (as
    :func:`~pairedge.core.features.base.check_flow`).

    Args:
        flow: (h, w, 2) float32; boxes: (N, 4) float ``x y w h`` full-image pixels.
    """
    f = np.asarray(flow, np.float32)
    if not np.isfinite(f).all():
        f = np.nan_to_num(f, nan=0.0, posinf=0.0, neginf=0.0)
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    h, w = f.shape[:2]
    rects = pool_rects(b, scale, (h, w), inset)
    moments = np.zeros((len(b), 4), np.float64)
    for i, (x0, y0, x1, y1) in enumerate(rects.tolist()):
        patch = f[y0:y1, x0:x1].reshape(-1, 2).astype(np.float64)
        moments[i, :2] = patch.sum(axis=0)
        moments[i, 2:] = (patch * patch).sum(axis=0)
    ys, xs = egomotion.grid_axes(h, w, grid_step)
    grid = np.ascontiguousarray(f[np.ix_(ys, xs)])
    return PooledFlow((h, w), float(scale), b.copy(), rects, moments, int(grid_step), grid)


def check_pooled(pooled: PooledFlow, boxes: np.ndarray, grid_step: int, inset: tuple[float, float]) -> None:
    """Raise InputError unless ``pooled`` was computed for exactly these boxes, grid step and inset."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    if pooled.boxes.shape != b.shape or not np.array_equal(pooled.boxes, b):
        raise InputError(
            f"pooled flow: computed for {len(pooled.boxes)} boxes, the features use {len(b)} other ones; "
            "fix by pooling the spec's usable detection rows (pairedge.core.features.base.usable_rows)"
        )
    if pooled.grid_step != grid_step:
        raise InputError(f"pooled flow: grid step {pooled.grid_step}, the spec's config uses {grid_step}")
    if not np.array_equal(pooled.rects, pool_rects(b, pooled.scale, pooled.shape, inset)):
        raise InputError(
            "pooled flow: its rectangles do not match the spec's pool_inset; pool with the same inset"
        )


def ego_any(
    flow: np.ndarray | PooledFlow,
    boxes: np.ndarray,
    scale: float,
    method: str,
    step: int,
    min_points: int = 20,
) -> np.ndarray:
    """Ego-motion (2, 3) from a dense field or a :class:`PooledFlow` (the same background samples)."""
    if not isinstance(flow, PooledFlow):
        return egomotion.estimate(flow, boxes, scale, method, step, min_points)
    if method not in egomotion.METHODS:
        raise InputError(f"ego_motion: expected one of {egomotion.METHODS}, got {method!r}")
    if method == "none":
        return egomotion.identity()
    ys, xs = egomotion.grid_axes(flow.shape[0], flow.shape[1], flow.grid_step)
    points, vectors = egomotion.grid_background(flow.grid, ys, xs, boxes, scale, min_points)
    return egomotion.fit(points, vectors, scale, method)


def pool_pooled(
    pooled: PooledFlow,
    boxes: np.ndarray,
    scale: float,
    ego: np.ndarray,
    dt: float,
    inset: tuple[float, float] = (0.15, 0.05),
) -> FlowMotion:
    """:func:`pool_flow` for a :class:`PooledFlow` (same formulas, sums already reduced)."""
    check_pooled(pooled, boxes, pooled.grid_step, inset)
    return motion_from_moments(pooled.boxes, pooled.rects, pooled.moments, scale, ego, dt)


def check_flow_result(
    flow: np.ndarray | PooledFlow | None, flow_scale: float, image_size: tuple[int, int]
) -> np.ndarray | PooledFlow | None:
    """:func:`pairedge.core.features.base.check_flow` for either form of a flow backend's result."""
    if not isinstance(flow, PooledFlow):
        return check_flow(flow, flow_scale, image_size)
    w_img, h_img = image_size
    if (
        abs(flow.scale - flow_scale) > 1e-9
        or abs(flow.shape[0] - h_img * flow_scale) > 1.5
        or abs(flow.shape[1] - w_img * flow_scale) > 1.5
    ):
        raise InputError(
            f"pooled flow: computed on a {flow.shape[0]} x {flow.shape[1]} flow image at scale {flow.scale}, "
            f"the frame is {h_img} x {w_img} at flow_scale {flow_scale}; pass the backend's scale"
        )
    return flow
