"""The pair block of the ``pairedge`` spec: geometry, relative motion and scene context of every pair.

All values are symmetric in A and B (swapping the two people leaves them unchanged). Distances are in
units of the pair's mean box height ``mh``; velocities in body heights per second. A person's velocity is
stored per its own height (person block); for pair quantities it is turned back into pixels
(``v * h``) and divided by ``mh``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.features.history import wrap_delta

EPS = 1e-6
#: Person-block columns used here (see ``pairedge.features.edge.PERSON_NAMES``).
VX, VY, SPEED, HIST_VX, HIST_VY = 0, 1, 2, 4, 5
MOVING_SPEED = 0.15  # heights/s: a person counts as moving in the scene context above this speed
MAX_TIME = 10.0  # seconds: time to closest approach is clamped to +-MAX_TIME
NEAR = 1.5  # mean heights: radius around a pair's midpoint for the neighbour count
INLINE = 0.3  # mean heights: distance from the line A-B for the in-line count
CHUNK = 512  # pairs per block in the neighbour counts (keeps the (pairs, people) temporaries in cache)

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


def _unit_cos(u: np.ndarray, v: np.ndarray, min_norm: float) -> np.ndarray:
    """Row-wise cosine of (M, 2) vectors; 0 where either norm is below ``min_norm``."""
    nu, nv = np.hypot(u[:, 0], u[:, 1]), np.hypot(v[:, 0], v[:, 1])
    ok = (nu > min_norm) & (nv > min_norm)
    return np.where(ok, (u * v).sum(axis=1) / np.maximum(nu * nv, EPS), 0.0)


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
    """Other people around each pair, (M,) float64 counts excluding A and B:

    * near: centres within ``NEAR`` mean heights of the pair's midpoint;
    * inline: centres within ``INLINE`` mean heights of the line A-B and beyond either person by 0.25 to 2
      mean heights along it (people continuing a queue).

    O(M N) in blocks of :data:`CHUNK` pairs; positions are complex numbers rotated into the frame of the
    line A-B and scaled by the pair's mean height, so "along" and "across" are the real and imaginary parts.
    """
    m = len(delta)
    near, inline = np.zeros(m), np.zeros(m)
    people = scene.centres[:, 0] + 1j * scene.centres[:, 1]
    mid = centre_a + delta / 2
    mid_c = mid[:, 0] + 1j * mid[:, 1]
    dist = np.hypot(delta[:, 0], delta[:, 1])
    half = dist / mean_h / 2  # A and B lie at this distance from the midpoint
    apart = dist > EPS  # coincident centres: no line A-B, so nobody is in line
    unit = np.where(apart, delta[:, 0] - 1j * delta[:, 1], 1.0) / np.where(apart, dist, 1.0)
    rot = unit / mean_h  # conj(unit direction A->B) / mean height
    for lo in range(0, m, CHUNK):
        sl = slice(lo, lo + CHUNK)
        rel = people[None, :] - mid_c[sl, None]
        if width is not None:
            rel.real = wrap_delta(rel.real, width)
        rel *= rot[sl, None]
        h = half[sl, None]
        near[sl] = (np.abs(rel) < NEAR).sum(axis=1) - 2 * (half[sl] < NEAR)
        along, across = np.abs(rel.real), np.abs(rel.imag)
        inline[sl] = ((across < INLINE) & (along > h + 0.25) & (along < h + 2.0)).sum(axis=1) * apart[sl]
    return [near, inline]


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
    """Relative-motion values; ``delta`` = centre B - centre A in pixels."""
    va, vb = pa[:, VX : VY + 1], pb[:, VX : VY + 1]  # heights/s of each person's own height
    sa, sb = pa[:, SPEED], pb[:, SPEED]
    rel = (vb * hb[:, None] - va * ha[:, None]) / mean_h[:, None]  # main motion, pair heights/s
    rel_h = (
        pb[:, HIST_VX : HIST_VY + 1] * hb[:, None] - pa[:, HIST_VX : HIST_VY + 1] * ha[:, None]
    ) / mean_h[:, None]
    dp = delta / mean_h[:, None]  # heights
    dist = np.hypot(dp[:, 0], dp[:, 1])
    unit = dp / np.maximum(dist, EPS)[:, None]
    rel2 = (rel_h**2).sum(axis=1)
    t_star = np.where(rel2 > min_speed**2, -(dp * rel_h).sum(axis=1) / np.maximum(rel2, EPS), 0.0)
    t_star = np.clip(t_star, -MAX_TIME, MAX_TIME)
    miss = np.hypot(*(dp + rel_h * np.maximum(t_star, 0.0)[:, None]).T)
    toward_a = _unit_cos(va, unit, 0.0) * (sa > min_speed)
    toward_b = _unit_cos(vb, -unit, 0.0) * (sb > min_speed)
    mean_v = (va * ha[:, None] + vb * hb[:, None]) / (2 * mean_h[:, None])
    return [
        np.hypot(rel[:, 0], rel[:, 1]),
        np.abs(sa - sb),
        _unit_cos(va, vb, min_speed),
        (rel_h * unit).sum(axis=1),
        miss,
        t_star,
        np.maximum(toward_a, toward_b),
        np.minimum(toward_a, toward_b),
        np.abs(_unit_cos(mean_v, unit, min_speed)),
        (sa + sb) / 2,
    ], mean_v


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
    motion, mean_v = _motion(person_a, person_b, ha, hb, delta, mean_h, min_speed)
    if scene is None:
        scene = scene_context(np.concatenate([person_a, person_b]), np.concatenate([a, b]))
    m = len(a)
    crowd = _unit_cos(mean_v, np.broadcast_to(scene.crowd_velocity, (m, 2)), min_speed)
    centre_a = a[:, :2] + a[:, 2:] / 2
    context = [np.full(m, v) for v in scene.values] + [crowd]
    context += neighbours(centre_a, delta, mean_h, scene, size[0] if wrap else None)
    return np.stack(_geometry(a, b, delta, mean_h, size) + motion + context, axis=1)
