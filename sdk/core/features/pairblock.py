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


def scene_context(person: np.ndarray, boxes: np.ndarray) -> Scene:
    """The :class:`Scene` of a frame from everyone's person block (N, Fp) and boxes (N, 4) ``x y w h``."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    n = len(person)
    if n == 0:
        return Scene(np.zeros(3), np.zeros(2), np.zeros((0, 2)))
    speed = person[:, SPEED]
    values = np.array([n / 10.0, float(np.median(speed)), float((speed > MOVING_SPEED).mean())])
    return Scene(values, person[:, VX : VY + 1].mean(axis=0), b[:, :2] + b[:, 2:] / 2)


def neighbours(centre_a, delta, mean_h, scene: Scene, width: float | None) -> list[np.ndarray]:
    """Other people around each pair, (M,) float64 counts excluding A and B (near, inline; see
    :mod:`pairedge.core.features.neighbours`, which computes them by a float32 filter with exact fallback)."""
    return count_neighbours(centre_a, delta, mean_h, scene.centres, width)


def _geometry(a: np.ndarray, b: np.ndarray, delta: np.ndarray, mean_h: np.ndarray, size: tuple[float, float]):
    ha, hb = a[:, 3], b[:, 3]
    dist = np.hypot(delta[:, 0], delta[:, 1])
    overlap_y = np.maximum(0.0, np.minimum(a[:, 1] + ha, b[:, 1] + hb) - np.maximum(a[:, 1], b[:, 1]))
    overlap_x = np.maximum(
        0.0, np.minimum(a[:, 0] + a[:, 2], b[:, 0] + b[:, 2]) - np.maximum(a[:, 0], b[:, 0])
    )
    inter = overlap_x * overlap_y
    union = a[:, 2] * ha + b[:, 2] * hb - inter
    return [
        dist / mean_h,
        np.abs(delta[:, 0]) / mean_h,
        np.abs((a[:, 1] + ha) - (b[:, 1] + hb)) / mean_h,
        np.minimum(ha, hb) / np.maximum(np.maximum(ha, hb), EPS),
        overlap_y / np.maximum(np.minimum(ha, hb), EPS),
        inter / np.maximum(union, EPS),
        mean_h / size[1],
        ((a[:, 1] + ha) + (b[:, 1] + hb)) / 2 / size[1],
        (a[:, 2] + b[:, 2]) / 2 / size[0],
    ]


def _motion(pa: np.ndarray, pb: np.ndarray, ha, hb, delta, mean_h, min_speed: float):
    """Relative-motion values (list of (M,) arrays), mean velocity ``(x, y)`` and its norm (for the crowd
    alignment); ``delta`` = centre B - centre A in pixels. Velocities are per the person's own height: turned
    into pixels (``v * h``) and divided by the pair's mean height."""
    va = pa[:, VX], pa[:, VY]
    vb = pb[:, VX], pb[:, VY]
    sa, sb = pa[:, SPEED], pb[:, SPEED]
    px_a, px_b = (va[0] * ha, va[1] * ha), (vb[0] * hb, vb[1] * hb)  # pixels/s
    rel = (px_b[0] - px_a[0]) / mean_h, (px_b[1] - px_a[1]) / mean_h  # main motion, pair heights/s
    rel_h = tuple(
        (pb[:, c] * hb - pa[:, c] * ha) / mean_h for c in (HIST_VX, HIST_VY)
    )  # history motion, pair heights/s
    dp = delta[:, 0] / mean_h, delta[:, 1] / mean_h  # heights
    dist = np.maximum(np.hypot(dp[0], dp[1]), EPS)
    unit = dp[0] / dist, dp[1] / dist
    n_unit = np.hypot(unit[0], unit[1])
    rel2 = rel_h[0] ** 2 + rel_h[1] ** 2
    t_star = np.where(
        rel2 > min_speed**2, -(dp[0] * rel_h[0] + dp[1] * rel_h[1]) / np.maximum(rel2, EPS), 0.0
    )
    t_star = np.clip(t_star, -MAX_TIME, MAX_TIME)
    ahead = np.maximum(t_star, 0.0)
    miss = _norm(dp[0] + rel_h[0] * ahead, dp[1] + rel_h[1] * ahead)
    na, nb = np.hypot(*va), np.hypot(*vb)
    toward_a = _cos(va, unit, na, n_unit, 0.0) * (sa > min_speed)
    toward_b = _cos(vb, (-unit[0], -unit[1]), nb, n_unit, 0.0) * (sb > min_speed)
    twice_h = 2 * mean_h
    mean_v = (px_a[0] + px_b[0]) / twice_h, (px_a[1] + px_b[1]) / twice_h
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
    boxes_a: np.ndarray,
    boxes_b: np.ndarray,
    person_a: np.ndarray,
    person_b: np.ndarray,
    size: tuple[float, float],
    scene: Scene | None = None,
    min_speed: float = 0.05,
    wrap: bool = False,
) -> np.ndarray:
    """Pair values (:data:`PAIR_NAMES`).

    Args:
        boxes_a, boxes_b: (M, 4) float ``x y w h`` in pixels.
        person_a, person_b: (M, Fp) person blocks of A and B.
        size: image ``(W, H)``.
        scene: :func:`scene_context` of the frame (None: computed from the pairs' people only).
        min_speed: heights/s below which a velocity has no direction (cosines become 0).
        wrap: 360-degree panorama (horizontal differences wrap around).

    Returns:
        (M, 25) float64, unclamped.
    """
    a, b = np.asarray(boxes_a, np.float64).reshape(-1, 4), np.asarray(boxes_b, np.float64).reshape(-1, 4)
    ha, hb = a[:, 3], b[:, 3]
    mean_h = np.maximum((ha + hb) / 2, EPS)
    delta = (b[:, :2] + b[:, 2:] / 2) - (a[:, :2] + a[:, 2:] / 2)
    delta[:, 0] = wrap_delta(delta[:, 0], size[0] if wrap else None)
    motion, (mean_v, n_mean) = _motion(person_a, person_b, ha, hb, delta, mean_h, min_speed)
    if scene is None:
        scene = scene_context(np.concatenate([person_a, person_b]), np.concatenate([a, b]))
    m = len(a)
    cv = scene.crowd_velocity
    crowd = _cos(mean_v, (cv[0], cv[1]), n_mean, np.hypot(cv[0], cv[1]), min_speed)
    centre_a = a[:, :2] + a[:, 2:] / 2
    context = [np.full(m, v) for v in scene.values] + [crowd]
    context += neighbours(centre_a, delta, mean_h, scene, size[0] if wrap else None)
    return np.stack(_geometry(a, b, delta, mean_h, size) + motion + context, axis=1)
