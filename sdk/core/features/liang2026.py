"""``liang2026``: the feature spec of the paper's released code (Liang, Gillet Schlegel, Leite 2026).

Compatible with the released code so its users' checkpoints can be deployed (SPEC.md section 3). Boxes are
``x y w h``; ``cx = x + w/2``, ``cy = y + h/2``; image ``W x H``; ``dx = |cxA - cxB|`` (wrapped to
``min(dx, W - dx)`` when ``wrap=True``, for 360-degree panoramas such as JRDB's 3760 x 480 stitched
images; off by default); ``dcy = cyA - cyB``.

Stage 1 (7 values, with the released code's epsilons; ``a = w*h``):

0. ``(dx - (wA + wB)/2) / W``                          horizontal gap
1. ``min(hA, hB) / max(hA, hB + 1e-6)``                height ratio
2. ``dx / W``                                           horizontal distance
3. ``max(0, min(yA+hA, yB+hB) - max(yA, yB)) / min(hA, hB + 1e-6)``   vertical overlap
4. ``min(aA, aB) / max(aA, aB + 1e-6)``                area ratio
5. ``sqrt(dx^2 + dcy^2) / sqrt(aA + aB + 1e-6)``       centre distance over size
6. ``|dcy| / H``                                        vertical distance

(Value 3 of a zero-height box A is 0 where the released code divides 0 by 0.)

Stage 2 (10 values) from dense Farneback flow (:data:`FARNEBACK_PARAMS`, grayscale by :func:`to_gray`: PIL's
integer luma, bit-exact with the released code's ``Image.convert("L")``),
pooled over the pixel union of the two rectangles ``[int(x), int(x+w)) x [int(y), int(y+h))`` clipped to
the image; ``d`` = centre distance (never wrapped); every divisor is ``max(., 1e-5)``; all values clamped to
[-10, 10]:

0. ``d / mean(hA, hB)``                 1. ``d / mean(wA, wB)``
2. ``mean |f| / mean(aA, aB)``          3. ``std |f| / mean(aA, aB)`` (population std)
4. ``mean |fy| / mean |fx|``            5. ``mean(hA/wA, hB/wB)``
6. ``mean(hA, hB) / H``                 7. ``mean(yA+hA, yB+hB) / H``
8. direction consistency: ``|sum of unit flow vectors| / n`` over union pixels with ``|f| > 1.0``; 0 when
   ``n < 10``.
9. "synchrony": identically 1.0 in the released code (it compares A with itself through the shared union
   mask). Kept for compatibility; it carries no information.

Without flow (box-only use) values 2, 3, 4 and 8 are 0. Pooling uses integral images (O(1) per pair after
one pass over the image); :func:`stage2_features_reference` is the straightforward mask-based definition,
kept for tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import cv2
import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.features.base import (
    FeatureSpec,
    PairFeatures,
    check_flow,
    check_image_size,
    frame_pairs,
)
from pairedge.core.features.integral import pixel_rects, union_sums
from pairedge.core.types import Detections

#: Farneback parameters of the released code, as keyword arguments of ``cv2.calcOpticalFlowFarneback``.
FARNEBACK_PARAMS: MappingProxyType[str, Any] = MappingProxyType(
    {
        "pyr_scale": 0.5,
        "levels": 3,
        "winsize": 15,
        "iterations": 3,
        "poly_n": 5,
        "poly_sigma": 1.2,
        "flags": 0,
    }
)

CLAMP = 10.0
DIV_EPS = 1e-5
MOVING_PIXEL = 1.0  # |flow| above this counts for direction consistency
MIN_MOVING_PIXELS = 10

STAGE1_NAMES = (
    "horizontal_gap",
    "height_ratio",
    "horizontal_distance",
    "vertical_overlap",
    "area_ratio",
    "centre_distance_over_size",
    "vertical_distance",
)
STAGE2_NAMES = (
    "distance_over_mean_height",
    "distance_over_mean_width",
    "mean_flow_magnitude_over_mean_area",
    "std_flow_magnitude_over_mean_area",
    "mean_abs_fy_over_mean_abs_fx",
    "mean_aspect_ratio",
    "mean_height_over_image_height",
    "mean_bottom_over_image_height",
    "direction_consistency",
    "synchrony_constant",
)
#: Columns that encode the camera's placement (absolute image size and position), not the interaction.
VIEWPOINT_NAMES = frozenset({"mean_height_over_image_height", "mean_bottom_over_image_height"})


#: PIL's ``Image.convert("L")`` weights: ``L = (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16``.
PIL_LUMA_WEIGHTS = (19595, 38470, 7471)


class PilLuma:
    """PIL's integer luma of uint8 BGR / BGRA frames, bit-exact with ``Image.convert("L")``, reusing buffers.

    The released code reads frames with PIL and converts them with ``convert("L")``, whose 16-bit fixed point
    differs from OpenCV's 14-bit ``COLOR_BGR2GRAY`` by one level on about 0.1 % of pixels. Computed as
    ``floor((7471 B + 38470 G + 19595 R + 32768) / 65536)`` with ``cv2.transform`` in float32: every product
    and partial sum is an integer below 2^24 and the division is by a power of two, so the result is exact
    (the tests check it against the integer formula on all 2^24 colours). About 1 ms for 1280 x 720.
    """

    def __init__(self) -> None:
        self._floats = np.empty((0, 0, 3), np.float32)
        self._sums = np.empty((0, 0), np.float32)

    def __call__(self, image: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Luma of ``image`` ((H, W, 3) BGR or (H, W, 4) BGRA uint8; alpha ignored, as PIL does).

        Returns:
            (H, W) uint8: ``out`` when given, else a new array.
        """
        if image.ndim != 3 or image.shape[2] not in (3, 4) or image.dtype != np.uint8:
            raise InputError(
                f"image: expected (H, W, 3) BGR or (H, W, 4) BGRA uint8, got {image.dtype} {image.shape}"
            )
        h, w, c = image.shape
        if self._floats.shape != (h, w, c):
            self._floats = np.empty((h, w, c), np.float32)
            self._sums = np.empty((h, w), np.float32)
        r, g, b = PIL_LUMA_WEIGHTS
        weights = np.array([[b, g, r] + [0] * (c - 3) + [0x8000]], np.float32)  # last column: the offset
        np.copyto(self._floats, image, casting="unsafe")
        cv2.transform(self._floats, weights, dst=self._sums)
        self._sums *= np.float32(1.0 / 65536.0)
        np.floor(self._sums, out=self._sums)
        if out is None:
            out = np.empty((h, w), np.uint8)
        np.copyto(out, self._sums, casting="unsafe")
        return out


def pil_luma(image: np.ndarray) -> np.ndarray:
    """(H, W) uint8 luma of a uint8 BGR / BGRA image, bit-exact with PIL's ``convert("L")``
    (:class:`PilLuma`)."""
    return PilLuma()(image)


def to_gray(image: np.ndarray) -> np.ndarray:
    """Luma of a BGR / BGRA image as the released code computes it; a gray image is returned as is.

    uint8 colour images use PIL's integer formula (:func:`pil_luma`, bit-exact with ``convert("L")``, what the
    released code uses); uint16 / float32 ones ``cv2.COLOR_BGR2GRAY`` (ITU-R 601 luma; PIL has no such mode).

    Args:
        image: (H, W) gray, or (H, W, 3) BGR, or (H, W, 4) BGRA; uint8, uint16 or float32.

    Returns:
        (H, W) array of the input dtype.
    """
    image = np.asarray(image)
    if image.ndim == 2:
        return image
    if image.ndim == 3 and image.shape[2] == 1:
        return image[:, :, 0]
    if image.ndim == 3 and image.shape[2] in (3, 4):
        if image.dtype == np.uint8:
            return pil_luma(image)
        if image.dtype not in (np.uint16, np.float32):
            raise InputError(f"image: expected uint8, uint16 or float32, got {image.dtype}")
        code = cv2.COLOR_BGR2GRAY if image.shape[2] == 3 else cv2.COLOR_BGRA2GRAY
        return cv2.cvtColor(image, code)
    raise InputError(f"image: expected (H, W), (H, W, 3) or (H, W, 4), got shape {image.shape}")


def farneback_flow(prev: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Dense flow prev -> current with :data:`FARNEBACK_PARAMS` (reference helper for tests and training).

    Args:
        prev, current: images of the same size, gray or BGR (turned gray by :func:`to_gray`).

    Returns:
        (H, W, 2) float32 flow in pixels.
    """
    a, b = to_gray(prev), to_gray(current)
    if a.shape != b.shape:
        raise InputError(f"flow: frames must have the same size, got {a.shape} and {b.shape}")
    p = FARNEBACK_PARAMS
    flow = cv2.calcOpticalFlowFarneback(  # type: ignore[call-overload]  # stubs reject flow=None
        a,
        b,
        None,
        p["pyr_scale"],
        p["levels"],
        p["winsize"],
        p["iterations"],
        p["poly_n"],
        p["poly_sigma"],
        p["flags"],
    )
    return np.asarray(flow, dtype=np.float32)


def _boxes(boxes: np.ndarray, what: str) -> np.ndarray:
    b = np.asarray(boxes, dtype=np.float64)
    if b.ndim != 2 or b.shape[1] != 4:
        raise InputError(f"{what}: expected an (M, 4) array of x y w h, got shape {b.shape}")
    return b


def stage1_features(
    boxes_a: np.ndarray, boxes_b: np.ndarray, width: float, height: float, wrap: bool = False
) -> np.ndarray:
    """The 7 stage-1 values of each pair (see the module docstring).

    Args:
        boxes_a, boxes_b: (M, 4) float, ``x y w h`` in pixels.
        width, height: image size ``W``, ``H``.
        wrap: 360-degree panorama: horizontal distances wrap around (``min(dx, W - dx)``).

    Returns:
        (M, 7) float32.
    """
    a, b = _boxes(boxes_a, "boxes_a"), _boxes(boxes_b, "boxes_b")
    xa, ya, wa, ha = a.T
    xb, yb, wb, hb = b.T
    dx = np.abs((xa + wa / 2) - (xb + wb / 2))
    if wrap:
        dx = np.minimum(dx, width - dx)
    dcy = (ya + ha / 2) - (yb + hb / 2)
    area_a, area_b = wa * ha, wb * hb
    overlap = np.maximum(0.0, np.minimum(ya + ha, yb + hb) - np.maximum(ya, yb))
    out = np.stack(
        [
            (dx - (wa + wb) / 2) / width,
            np.minimum(ha, hb) / np.maximum(ha, hb + 1e-6),
            dx / width,
            overlap / np.maximum(np.minimum(ha, hb + 1e-6), 1e-12),  # 0/0 -> 0 for zero-height A
            np.minimum(area_a, area_b) / np.maximum(area_a, area_b + 1e-6),
            np.sqrt(dx**2 + dcy**2) / np.sqrt(area_a + area_b + 1e-6),
            np.abs(dcy) / height,
        ],
        axis=1,
    )
    return np.nan_to_num(out, nan=0.0, posinf=np.inf, neginf=-np.inf).astype(np.float32)


def _geometry2(a: np.ndarray, b: np.ndarray, height: float) -> dict[str, np.ndarray]:
    """Box-only stage-2 quantities: distance ratios, aspect, height and bottom (values 0, 1, 5, 6, 7)."""
    xa, ya, wa, ha = a.T
    xb, yb, wb, hb = b.T
    d = np.hypot((xa + wa / 2) - (xb + wb / 2), (ya + ha / 2) - (yb + hb / 2))
    mean_h, mean_w = (ha + hb) / 2, (wa + wb) / 2
    g = {
        "d_h": d / np.maximum(mean_h, DIV_EPS),
        "d_w": d / np.maximum(mean_w, DIV_EPS),
        "aspect": (ha / np.maximum(wa, DIV_EPS) + hb / np.maximum(wb, DIV_EPS)) / 2,
        "height": mean_h / max(height, DIV_EPS),
        "bottom": ((ya + ha) + (yb + hb)) / 2 / max(height, DIV_EPS),
        "mean_area": np.maximum((wa * ha + wb * hb) / 2, DIV_EPS),
    }
    return g


def _assemble2(g: dict[str, np.ndarray], flow_stats: np.ndarray) -> np.ndarray:
    """Stage-2 matrix from geometry and (M, 4) flow stats ``mean|f|, std|f|, mean|fy|/mean|fx|, dircons``."""
    m = len(g["d_h"])
    out = np.stack(
        [
            g["d_h"],
            g["d_w"],
            flow_stats[:, 0] / g["mean_area"],
            flow_stats[:, 1] / g["mean_area"],
            flow_stats[:, 2],
            g["aspect"],
            g["height"],
            g["bottom"],
            flow_stats[:, 3],
            np.ones(m),
        ],
        axis=1,
    )
    return np.clip(np.nan_to_num(out, nan=0.0), -CLAMP, CLAMP).astype(np.float32)


def flow_magnitude(flow: np.ndarray) -> np.ndarray:
    """(h, w) float32 ``sqrt(fx^2 + fy^2)`` computed in float32 (``cv2.magnitude``), shared by the fast
    path and the reference so both apply the ``> 1.0`` threshold to the same numbers."""
    fx = np.ascontiguousarray(flow[:, :, 0], dtype=np.float32)
    fy = np.ascontiguousarray(flow[:, :, 1], dtype=np.float32)
    return cv2.magnitude(fx, fy)


def flow_tables(flow: np.ndarray) -> np.ndarray:
    """Summed-area tables of the per-pixel quantities pooled for stage 2.

    Args:
        flow: (h, w, 2) float32.

    Returns:
        (7, h + 1, w + 1) float64 tables of ``|f|, |f|^2, |fx|, |fy|, moving, cos, sin`` where
        ``moving = |f| > 1.0`` and ``cos, sin`` are the unit flow direction on moving pixels (0 elsewhere).
        ``|f|`` is float32 (:func:`flow_magnitude`); its squares are summed in float64 (``cv2.integral2``).
    """
    fx, fy = cv2.split(np.ascontiguousarray(flow, dtype=np.float32))
    mag = cv2.magnitude(fx, fy)
    moving = (mag > MOVING_PIXEL).astype(np.float32)
    inv = np.maximum(mag, MOVING_PIXEL)
    np.reciprocal(inv, out=inv)
    inv *= moving  # 1 / |f| on moving pixels, 0 elsewhere
    cos, sin = fx * inv, fy * inv
    h, w = mag.shape
    out = np.empty((7, h + 1, w + 1), np.float64)
    out[0], out[1] = cv2.integral2(mag, sdepth=cv2.CV_64F, sqdepth=cv2.CV_64F)
    for c, plane in ((2, np.abs(fx)), (3, np.abs(fy)), (4, moving), (5, cos), (6, sin)):
        cv2.integral(plane, out[c], sdepth=cv2.CV_64F)
    return out


def _stats_from_sums(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(M, 4) flow statistics from union sums of :func:`flow_tables` and pixel counts."""
    n = np.maximum(counts.astype(np.float64), DIV_EPS)
    mean_mag = sums[:, 0] / n
    std_mag = np.sqrt(np.maximum(sums[:, 1] / n - mean_mag**2, 0.0))
    ratio = (sums[:, 3] / n) / np.maximum(sums[:, 2] / n, DIV_EPS)
    moving = np.rint(sums[:, 4])
    resultant = np.hypot(sums[:, 5], sums[:, 6]) / np.maximum(moving, 1.0)
    dircons = np.where(moving >= MIN_MOVING_PIXELS, resultant, 0.0)
    return np.stack([mean_mag, std_mag, ratio, dircons], axis=1)


def stage2_features(
    boxes_a: np.ndarray,
    boxes_b: np.ndarray,
    width: float,
    height: float,
    flow: np.ndarray | None = None,
    table: np.ndarray | None = None,
) -> np.ndarray:
    """The 10 stage-2 values of each pair, flow pooled with integral images (O(1) per pair).

    Args:
        boxes_a, boxes_b: (M, 4) float, ``x y w h`` in pixels of the full image.
        width, height: image size ``W``, ``H``; the flow must be full resolution (H, W, 2).
        flow: (H, W, 2) float32 previous -> current, or None (values 2, 3, 4, 8 become 0).
        table: optional precomputed ``flow_tables(flow)`` to share across calls.

    Returns:
        (M, 10) float32, clamped to [-10, 10].
    """
    a, b = _boxes(boxes_a, "boxes_a"), _boxes(boxes_b, "boxes_b")
    g = _geometry2(a, b, height)
    if flow is None and table is None:
        return _assemble2(g, np.zeros((len(a), 4)))
    if table is None:
        table = flow_tables(np.asarray(flow))
    h, w = table.shape[1] - 1, table.shape[2] - 1
    sums, counts = union_sums(table, pixel_rects(a, 1.0, w, h), pixel_rects(b, 1.0, w, h))
    return _assemble2(g, _stats_from_sums(sums, counts))


def stage2_features_reference(
    boxes_a: np.ndarray, boxes_b: np.ndarray, width: float, height: float, flow: np.ndarray | None
) -> np.ndarray:
    """Straightforward mask-based definition of :func:`stage2_features` (slow; for tests and benchmarks).

    Same arguments and result as :func:`stage2_features`; builds the union mask of each pair explicitly.
    """
    a, b = _boxes(boxes_a, "boxes_a"), _boxes(boxes_b, "boxes_b")
    g = _geometry2(a, b, height)
    stats = np.zeros((len(a), 4))
    if flow is not None:
        fx = flow[:, :, 0].astype(np.float64)
        fy = flow[:, :, 1].astype(np.float64)
        mag = flow_magnitude(flow).astype(np.float64)
        ang = np.arctan2(fy, fx)
        h, w = mag.shape
        for i in range(len(a)):
            mask = np.zeros((h, w), bool)
            for x, y, bw, bh in (a[i], b[i]):
                x0, x1 = max(int(x), 0), min(int(x + bw), w)
                y0, y1 = max(int(y), 0), min(int(y + bh), h)
                if x1 > x0 and y1 > y0:
                    mask[y0:y1, x0:x1] = True
            if not mask.any():
                stats[i, 2] = 0.0
                continue
            m = mag[mask]
            stats[i, 0] = m.mean()
            stats[i, 1] = m.std()
            stats[i, 2] = np.abs(fy[mask]).mean() / max(np.abs(fx[mask]).mean(), DIV_EPS)
            moving = ang[mask][m > MOVING_PIXEL]
            if len(moving) >= MIN_MOVING_PIXELS:
                stats[i, 3] = np.hypot(np.cos(moving).sum(), np.sin(moving).sum()) / len(moving)
    return _assemble2(g, stats)


@dataclass(frozen=True)
class Liang2026Config:
    """Options of the ``liang2026`` spec.

    Attributes:
        wrap: the images are 360-degree panoramas (JRDB stitched 3760 x 480): horizontal distances of
            stage 1 wrap around. Off for ordinary cameras.
    """

    wrap: bool = False


class Liang2026Extractor:
    """Per-stream extractor of ``liang2026`` (stateless apart from its config: the spec has no history)."""

    def __init__(self, config: Liang2026Config) -> None:
        self.config = config

    def reset(self) -> None:
        """Nothing to forget: this spec has no per-track state."""

    def step(
        self,
        detections: Detections,
        timestamp: float,
        image_size: tuple[int, int],
        flow: np.ndarray | None = None,
        flow_scale: float = 1.0,
    ) -> PairFeatures:
        """Features of all pairs (see :class:`pairedge.core.features.base.FeatureExtractor`).

        The flow should be at full resolution (``flow_scale`` 1, as in the released code); a flow at
        another scale is resized to full resolution with its vectors rescaled, which only approximates it.
        """
        w, h = check_image_size(image_size)
        flow = check_flow(flow, flow_scale, (w, h))
        pairs, index = frame_pairs(detections)
        if len(pairs) == 0:
            return PairFeatures.empty(len(STAGE1_NAMES), len(STAGE2_NAMES))
        if flow is not None and flow.shape[:2] != (h, w):
            flow = cv2.resize(flow, (w, h), interpolation=cv2.INTER_LINEAR) / np.float32(flow_scale)
        boxes = np.asarray(detections.boxes, dtype=np.float64)
        ba, bb = boxes[index[:, 0]], boxes[index[:, 1]]
        s1 = stage1_features(ba, bb, w, h, wrap=self.config.wrap)
        s2 = stage2_features(ba, bb, w, h, flow=flow)
        return PairFeatures(pairs, index, s1, s2)


class Liang2026Spec(FeatureSpec):
    """The ``liang2026`` feature spec (see the module docstring)."""

    name = "liang2026"
    version = "1"
    stage1_names = STAGE1_NAMES
    stage2_names = STAGE2_NAMES
    needs_flow = True
    flow_backend = "farneback"
    default_flow_scale = 1.0
    viewpoint_names = VIEWPOINT_NAMES
    box_shape_names = frozenset({"mean_aspect_ratio"})
    config_type = Liang2026Config

    def _new_extractor(self, config: Liang2026Config) -> Liang2026Extractor:
        return Liang2026Extractor(config)


SPEC = Liang2026Spec()
