"""The pair block of the ``pairedge`` spec: geometry, relative motion and scene context of every pair.

All values are symmetric in A and B (swapping the two people leaves them unchanged). Distances are in
units of the pair's mean box height ``mh``; velocities in body heights per second. A person's velocity is
stored per its own height (person block); for pair quantities it is turned back into pixels
(``v * h``) and divided by ``mh``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.core.features.history import wrap_delta
from pairedge.core.features.neighbours import INLINE as INLINE  # re-exported: the pair block's radii
from pairedge.core.features.neighbours import NEAR as NEAR
from pairedge.core.features.neighbours import neighbours as count_neighbours

EPS = 1e-6
#: Person-block columns used here (see ``pairedge.core.features.edge.PERSON_NAMES``).
VX, VY, SPEED, HIST_VX, HIST_VY = 0, 1, 2, 4, 5
MOVING_SPEED = 0.15  # heights/s: a person counts as moving in the scene context above this speed
MAX_TIME = 10.0  # seconds: time to closest approach is clamped to +-MAX_TIME

GEOMETRY_NAMES = (
    "distance",
    "dx",
    "bottom_dy",
    "height_ratio",
    "vertical_overlap",
    "iou",
    "mean_height",
    "mean_bottom",
    "mean_width",
)
MOTION_NAMES = (
    "relative_speed",
    "speed_difference",
    "velocity_cosine",
    "approach_rate",
    "closest_approach",
    "time_to_closest",
    "toward_max",
    "toward_min",
    "heading_alignment",
    "mean_speed",
)
SCENE_NAMES = (
    "scene_count",
    "scene_median_speed",
    "scene_moving_fraction",
    "crowd_alignment",
    "near_count",
    "inline_count",
)
PAIR_NAMES = GEOMETRY_NAMES + MOTION_NAMES + SCENE_NAMES


def _norm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``sqrt(x^2 + y^2)`` of (M,) arrays: ~5x cheaper than ``np.hypot``, equal to it within an ulp or two.
    Only for output values: norms compared with a threshold keep ``np.hypot``, so no comparison flips."""
    return np.sqrt(x * x + y * y)


def _cos(u: tuple[np.ndarray, np.ndarray], v: tuple[np.ndarray, np.ndarray], nu, nv, min_norm: float):
    """Cosine of vectors given as (M,) component arrays ``(x, y)`` with their norms ``nu``, ``nv`` (M,);
    0 where either norm is below ``min_norm``. Components as separate contiguous arrays (not (M, 2)
    columns) and the dot product written out keep this cheap at thousands of pairs."""
    ok = (nu > min_norm) & (nv > min_norm)
    return np.where(ok, (u[0] * v[0] + u[1] * v[1]) / np.maximum(nu * nv, EPS), 0.0)


@dataclass(frozen=True)
class Scene:
    """Everyone in the frame, for the context values of the pair block.

    Attributes:
        values: (3,) ``N / 10``, median speed (heights/s), fraction moving faster than :data:`MOVING_SPEED`.
        crowd_velocity: (2,) mean person velocity (heights/s).
        centres: (N, 2) box centres in pixels.
    """

    values: np.ndarray
    crowd_velocity: np.ndarray
    centres: np.ndarray


def _median(x: np.ndarray) -> float:
    """``np.median`` of a (N,) float64 array, N >= 1: the same value (NaN when any value is NaN), from one
    sort, far cheaper than ``np.median``'s generic machinery for a frame's few people."""
    s = np.sort(x)
    if np.isnan(s[-1]):  # sorted last; np.median's answer then
        return float("nan")
    k = len(s) // 2
    return float(s[k]) if len(s) % 2 else float((s[k - 1] + s[k]) / 2)


def scene_context(person: np.ndarray, boxes: np.ndarray) -> Scene:
    """The :class:`Scene` of a frame from everyone's person block (N, Fp) and boxes (N, 4) ``x y w h``."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    n = len(person)
    if n == 0:
        return Scene(np.zeros(3), np.zeros(2), np.zeros((0, 2)))
    speed = person[:, SPEED]
    values = np.array([n / 10.0, _median(speed), float(np.count_nonzero(speed > MOVING_SPEED)) / n])
    return Scene(values, person[:, VX : VY + 1].mean(axis=0), b[:, :2] + b[:, 2:] / 2)


def neighbours(centre_a, delta, mean_h, scene: Scene, width: float | None) -> list[np.ndarray]:
    """Other people around each pair, (M,) float64 counts excluding A and B (near, inline; see
    :mod:`pairedge.core.features.neighbours`, which computes them by a float32 filter with exact fallback)."""
    return count_neighbours(centre_a, delta, mean_h, scene.centres, width)


#: Per-person rows gathered for every pair (:func:`_people`): box edges and size, centre, and the person
#: block's velocities turned into pixels per second.
_ROWS = (
    "x",
    "y",
    "w",
    "h",
    "right",
    "bottom",
    "area",
    "cx",
    "cy",
    "vx",
    "vy",
    "speed",
    "px_vx",
    "px_vy",
    "hist_px_vx",
    "hist_px_vy",
)


def _people(boxes: np.ndarray, person: np.ndarray) -> np.ndarray:
    """(len(_ROWS), N) float64: one row per quantity of :data:`_ROWS`, one column per person."""
    b = boxes.T
    x, y, w, h = b
    v = person.T
    return np.stack(
        [
            x,
            y,
            w,
            h,
            x + w,
            y + h,
            w * h,
            x + w / 2,
            y + h / 2,
            v[VX],
            v[VY],
            v[SPEED],
            v[VX] * h,
            v[VY] * h,
            v[HIST_VX] * h,
            v[HIST_VY] * h,
        ]
    )


class _Side:
    """One side (A or B) of every pair: each :data:`_ROWS` quantity as a contiguous (M,) float64 array."""

    def __init__(self, rows: np.ndarray) -> None:
        for name, row in zip(_ROWS, rows, strict=True):
            setattr(self, name, row)

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    h: np.ndarray
    right: np.ndarray
    bottom: np.ndarray
    area: np.ndarray
    cx: np.ndarray
    cy: np.ndarray
    vx: np.ndarray
    vy: np.ndarray
    speed: np.ndarray
    px_vx: np.ndarray
    px_vy: np.ndarray
    hist_px_vx: np.ndarray
    hist_px_vy: np.ndarray


def _geometry(a: _Side, b: _Side, dx, dy, mean_h, size: tuple[float, float]) -> list[np.ndarray]:
    dist = np.hypot(dx, dy)
    overlap_y = np.maximum(0.0, np.minimum(a.bottom, b.bottom) - np.maximum(a.y, b.y))
    overlap_x = np.maximum(0.0, np.minimum(a.right, b.right) - np.maximum(a.x, b.x))
    inter = overlap_x * overlap_y
    union = a.area + b.area - inter
    low, high = np.minimum(a.h, b.h), np.maximum(a.h, b.h)
    return [
        dist / mean_h,
        np.abs(dx) / mean_h,
        np.abs(a.bottom - b.bottom) / mean_h,
        low / np.maximum(high, EPS),
        overlap_y / np.maximum(low, EPS),
        inter / np.maximum(union, EPS),
        mean_h / size[1],
        (a.bottom + b.bottom) / 2 / size[1],
        (a.w + b.w) / 2 / size[0],
    ]


def _motion(a: _Side, b: _Side, dx, dy, mean_h, min_speed: float):
    """Relative-motion values (list of (M,) arrays), mean velocity ``(x, y)`` and its norm (for the crowd
    alignment); ``dx, dy`` = centre B - centre A in pixels. Velocities are per the person's own height: turned
    into pixels (``v * h``) and divided by the pair's mean height."""
    va, vb = (a.vx, a.vy), (b.vx, b.vy)
    sa, sb = a.speed, b.speed
    rel = (b.px_vx - a.px_vx) / mean_h, (b.px_vy - a.px_vy) / mean_h  # main motion, pair heights/s
    rel_h = (b.hist_px_vx - a.hist_px_vx) / mean_h, (b.hist_px_vy - a.hist_px_vy) / mean_h  # history motion
    dp = dx / mean_h, dy / mean_h  # heights
    dist = np.maximum(np.hypot(dp[0], dp[1]), EPS)
    unit = dp[0] / dist, dp[1] / dist
    n_unit = np.hypot(unit[0], unit[1])
    rel2 = rel_h[0] ** 2 + rel_h[1] ** 2
    t_star = np.where(
        rel2 > min_speed**2, -(dp[0] * rel_h[0] + dp[1] * rel_h[1]) / np.maximum(rel2, EPS), 0.0
    )
    t_star = np.minimum(np.maximum(t_star, -MAX_TIME), MAX_TIME)  # np.clip, without its dispatch cost
    ahead = np.maximum(t_star, 0.0)
    miss = _norm(dp[0] + rel_h[0] * ahead, dp[1] + rel_h[1] * ahead)
    na, nb = np.hypot(*va), np.hypot(*vb)
    toward_a = _cos(va, unit, na, n_unit, 0.0) * (sa > min_speed)
    toward_b = _cos(vb, (-unit[0], -unit[1]), nb, n_unit, 0.0) * (sb > min_speed)
    twice_h = 2 * mean_h
    mean_v = (a.px_vx + b.px_vx) / twice_h, (a.px_vy + b.px_vy) / twice_h
    n_mean = np.hypot(*mean_v)
    return [
        _norm(*rel),
        np.abs(sa - sb),
        _cos(va, vb, na, nb, min_speed),
        rel_h[0] * unit[0] + rel_h[1] * unit[1],
        miss,
        t_star,
        np.maximum(toward_a, toward_b),
        np.minimum(toward_a, toward_b),
        np.abs(_cos(mean_v, unit, n_mean, n_unit, min_speed)),
        (sa + sb) / 2,
    ], (mean_v, n_mean)


def pair_block(
    boxes: np.ndarray,
    person: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    size: tuple[float, float],
    scene: Scene,
    min_speed: float = 0.05,
    wrap: bool = False,
) -> list[np.ndarray]:
    """Pair values (:data:`PAIR_NAMES`) of the pairs ``(ia[k], ib[k])`` of a frame's people.

    Per-person quantities are computed once (O(N)) and gathered for both sides of every pair in one call
    each, so every pair value is an operation on contiguous (M,) arrays.

    Args:
        boxes: (N, 4) float ``x y w h`` in pixels; person: (N, Fp) person blocks.
        ia, ib: (M,) int64 rows of A and B.
        size: image ``(W, H)``.
        scene: :func:`scene_context` of the frame (everyone in it).
        min_speed: heights/s below which a velocity has no direction (cosines become 0).
        wrap: 360-degree panorama (horizontal differences wrap around).

    Returns:
        25 (M,) float64 columns, unclamped.
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    table = _people(boxes, person)
    a, b = _Side(np.take(table, ia, axis=1)), _Side(np.take(table, ib, axis=1))
    mean_h = np.maximum((a.h + b.h) / 2, EPS)
    dx = wrap_delta(b.cx - a.cx, size[0] if wrap else None)
    dy = b.cy - a.cy
    motion, (mean_v, n_mean) = _motion(a, b, dx, dy, mean_h, min_speed)
    m = len(ia)
    cv = scene.crowd_velocity
    crowd = _cos(mean_v, (cv[0], cv[1]), n_mean, np.hypot(cv[0], cv[1]), min_speed)
    context = [np.full(m, v) for v in scene.values] + [crowd]
    centre_a = np.stack([a.cx, a.cy], axis=1)
    context += neighbours(centre_a, np.stack([dx, dy], axis=1), mean_h, scene, size[0] if wrap else None)
    return _geometry(a, b, dx, dy, mean_h, size) + motion + context
