"""Per-person pooling of a dense flow field for the ``pairedge`` spec: integral images, O(1) per box.

Each box (optionally trimmed by ``inset``) is mapped to flow pixels with
``[int(x*s), int((x+w)*s)) x [int(y*s), int((y+h)*s))`` clipped to the flow image; the camera's ego-motion
at the box centre is subtracted; results are normalised by the time step and the box height (body heights
per second).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.features import egomotion
from pairedge.features.integral import integral, pixel_rects, rect_area, rect_sums

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
        ego: (2, 3) camera motion in full-image pixels (:func:`pairedge.features.egomotion.estimate`).
        dt: seconds between the two frames.
        inset: fractions of width / height trimmed on each side of the box before pooling.

    Returns:
        :class:`FlowMotion`; ``velocity = (mean flow / scale - ego displacement at the box centre) / dt / h``,
        ``spread = sqrt(var fx + var fy) / scale / dt / h``; rows whose pooled region is empty are invalid
        (zeros).
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    inner = b.copy()
    inner[:, 0] += b[:, 2] * inset[0]
    inner[:, 1] += b[:, 3] * inset[1]
    inner[:, 2] *= 1 - 2 * inset[0]
    inner[:, 3] *= 1 - 2 * inset[1]
    rects = pixel_rects(inner, scale, flow.shape[1], flow.shape[0])
    n = rect_area(rects).astype(np.float64)
    valid = n > 0
    s = flow_moments(flow, rects) / np.maximum(n, 1.0)[:, None]
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


def flow_moments(flow: np.ndarray, rects: np.ndarray) -> np.ndarray:
    """Sums of ``fx, fy, fx^2, fy^2`` over pixel rectangles, accumulated in float64.

    Chooses the cheaper of two exact methods: per-box slicing (cost ~ the boxes' pixels; wins for a few
    people: 10 people cost ~0.3 ms instead of ~0.7 ms at 320 x 240, and ~4x less at full resolution) or
    integral images (cost ~ the whole field; wins for crowds). Both agree to float64 rounding.

    Args:
        flow: (h, w, 2) float32.
        rects: (M, 4) int64 clipped ``x0 y0 x1 y1`` (see :func:`pairedge.features.integral.pixel_rects`).

    Returns:
        (M, 4) float64.
    """
    h, w = flow.shape[:2]
    cover = float(rect_area(rects).sum()) / max(h * w, 1)
    if len(rects) <= SLICING_MAX_BOXES and cover <= SLICING_MAX_COVER:
        out = np.zeros((len(rects), 4), np.float64)
        for i, (x0, y0, x1, y1) in enumerate(rects.tolist()):
            patch = flow[y0:y1, x0:x1].reshape(-1, 2)
            if len(patch):
                out[i, :2] = patch.sum(axis=0, dtype=np.float64)
                out[i, 2:] = np.einsum("ij,ij->j", patch, patch, dtype=np.float64)
        return out
    fx, fy = flow[:, :, 0].astype(np.float64), flow[:, :, 1].astype(np.float64)
    return rect_sums(integral([fx, fy, fx * fx, fy * fy]), rects)


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
