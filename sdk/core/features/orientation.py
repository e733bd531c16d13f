"""Body orientation features of the ``pairedge`` spec (v2): does A face B, do they face the same way, does
B stand along A's facing direction (a queue), with a confidence mask so one model serves data with and
without orientation.

**Convention.** A person's orientation is the direction the body faces, as an angle in the image plane in
radians: ``0`` = facing image right (+x), ``pi/2`` = facing the camera (image down, +y: the ground plane seen
from an ordinary camera, nearer = lower), ``pi`` (or ``-pi``) = facing image left, ``-pi/2`` = facing away
from the camera. Collective Activity's 8 bins (1 right, 2 front-right, 3 front, 4 front-left, 5 left, 6
back-left, 7 back, 8 back-right) map to ``(bin - 1) * pi / 4`` (:func:`from_cad_bins`). Each orientation has a
confidence in [0, 1]; 0 (or a NaN angle) means unknown.

**Fallback.** A person without a given orientation who walks (track-history speed above
:data:`WALK_SPEED` body heights per second) faces where they walk: the direction of their image motion
``(vx, vy)``, with confidence :data:`MOTION_CONFIDENCE`. Standing people without an orientation stay unknown.

**Pair values** (all symmetric in A and B; :data:`PAIR_NAMES`), with ``u`` the unit vector from A to B in
the image (centre x difference and box-bottom difference, both per mean box height), ``fa``, ``fb`` the
facing unit vectors and ``ca``, ``cb`` their confidences:

* ``face_max``, ``face_min``: the larger / smaller of ``fa . u`` (A faces B: 1) and ``fb . -u`` (B faces A);
* ``facing_cos``: ``fa . fb`` (1 = same direction, -1 = opposite, e.g. face to face);
* ``facing_angle``: the angle between the two facings / pi, in [0, 1];
* ``facing_along``: ``(|fa . u| + |fb . u|) / 2`` (1 = the two stand along their facing direction, as in a
  queue; 0 = side by side);
* ``orientation_known``: ``min(ca, cb)``, the mask (0 = at least one is unknown: every value above is 0).

Person values (:data:`PERSON_NAMES`): ``ori_cos``, ``ori_sin``, ``ori_conf`` (0, 0, 0 when unknown).
"""

from __future__ import annotations

import numpy as np
from pairedge.core.features.history import wrap_delta

EPS = 1e-6
#: Body heights per second above which a person without an orientation faces their motion direction.
WALK_SPEED = 0.3
#: Confidence given to an orientation estimated from the motion direction.
MOTION_CONFIDENCE = 0.5
PERSON_NAMES = ("ori_cos", "ori_sin", "ori_conf")
PAIR_NAMES = ("face_max", "face_min", "facing_cos", "facing_angle", "facing_along", "orientation_known")


def from_cad_bins(bins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Collective Activity 8-way bins (N,) (1-8; anything else = unknown) -> angles (N,) float32 radians
    (NaN when unknown) and confidences (N,) float32 (1 known, 0 unknown)."""
    b = np.asarray(bins, np.float64).reshape(-1)
    known = np.isfinite(b) & (b >= 1) & (b <= 8) & (b == np.round(b))
    angle = np.where(known, (np.where(known, b, 1) - 1) * np.pi / 4, np.nan)
    angle = np.where(angle > np.pi, angle - 2 * np.pi, angle)
    return angle.astype(np.float32), known.astype(np.float32)


def from_shoulders(
    left: np.ndarray,
    right: np.ndarray,
    nose: np.ndarray | None = None,
    shoulder_width: float = 0.25,
    height: np.ndarray | None = None,
) -> np.ndarray:
    """Orientation (N,) radians from 2D shoulder keypoints (a pose estimator's output), image pixels.

    The facing direction is perpendicular to the shoulder line ``s = right - left`` (the person's own right
    and left): facing the camera, the right shoulder appears on the image's left, so the toward-camera
    component is ``-s_x / (shoulder_width * height)`` (clipped to [-1, 1]); the sideways component has the
    sign of the nose's offset from the shoulders' midpoint (without a nose, +x is assumed: give it).

    Args:
        left, right: (N, 2) shoulder positions ``x y``. nose: (N, 2) or None.
        shoulder_width: shoulder width as a fraction of the body height (about 0.25).
        height: (N,) body (box) heights in pixels; None = 4 x the shoulder distance (frontal assumption).
    """
    left, right = np.asarray(left, np.float64).reshape(-1, 2), np.asarray(right, np.float64).reshape(-1, 2)
    s = right - left
    full = shoulder_width * (np.asarray(height, np.float64) if height is not None else 4 * np.hypot(*s.T))
    toward = np.clip(-s[:, 0] / np.maximum(full, EPS), -1.0, 1.0)
    side = np.sqrt(1.0 - toward**2)
    if nose is not None:
        mid = (left + right) / 2
        side = side * np.where(np.asarray(nose, np.float64).reshape(-1, 2)[:, 0] >= mid[:, 0], 1.0, -1.0)
    return np.arctan2(toward, side).astype(np.float32)


def person_orientation(
    angle: np.ndarray | None, confidence: np.ndarray | None, velocity: np.ndarray, speed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Facing unit vectors (N, 2) and confidences (N,) of the people of a frame.

    Args:
        angle: (N,) radians (NaN = unknown) or None (nobody has one). confidence: (N,) in [0, 1], or None:
            1 for every finite angle (as :func:`pairedge.core.types.check_orientation` and the runtime's input
            validation default it).
        velocity: (N, 2) image motion in body heights per second (the track history's); speed: (N,).

    Returns:
        ``(facing (N, 2) float64, confidence (N,) float64)``; unknown people get (0, 0) and 0.
    """
    n = len(velocity)
    conf = np.ones(n) if confidence is None else np.asarray(confidence, np.float64).reshape(n)
    theta = np.full(n, np.nan) if angle is None else np.asarray(angle, np.float64).reshape(n)
    given = np.isfinite(theta) & (conf > 0)
    facing = np.zeros((n, 2))
    facing[given] = np.stack([np.cos(theta[given]), np.sin(theta[given])], axis=1)
    out_conf = np.where(given, np.clip(conf, 0.0, 1.0), 0.0)
    walking = ~given & (speed > WALK_SPEED)
    if walking.any():
        v = velocity[walking]
        facing[walking] = v / np.maximum(np.hypot(v[:, 0], v[:, 1]), EPS)[:, None]
        out_conf[walking] = MOTION_CONFIDENCE
    return facing, out_conf


def person_values(facing: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """(N, 3) ``ori_cos, ori_sin, ori_conf``."""
    return np.concatenate([facing, confidence[:, None]], axis=1)


def pair_values(
    facing_a: np.ndarray, conf_a: np.ndarray, facing_b: np.ndarray, conf_b: np.ndarray, delta: np.ndarray
) -> np.ndarray:
    """The pair values (:data:`PAIR_NAMES`), (M, 6) float64.

    Args:
        facing_a, facing_b: (M, 2) unit facing vectors (0 when unknown); conf_a, conf_b: (M,).
        delta: (M, 2) B - A: centre x difference and box-bottom difference, in any common unit.
    """
    dist = np.maximum(np.hypot(delta[:, 0], delta[:, 1]), EPS)
    u = delta / dist[:, None]
    known = np.minimum(conf_a, conf_b)
    mask = known > 0
    a_to_b = np.einsum("ij,ij->i", facing_a, u)
    b_to_a = -np.einsum("ij,ij->i", facing_b, u)
    cos = np.clip(np.einsum("ij,ij->i", facing_a, facing_b), -1.0, 1.0)
    values = np.stack(
        [
            np.maximum(a_to_b, b_to_a),
            np.minimum(a_to_b, b_to_a),
            cos,
            np.arccos(cos) / np.pi,
            (np.abs(a_to_b) + np.abs(b_to_a)) / 2,
        ],
        axis=1,
    )
    values[~mask] = 0.0
    return np.concatenate([values, known[:, None]], axis=1)


def box_pair_values(
    boxes: np.ndarray,
    facing: tuple[np.ndarray, np.ndarray],
    ia: np.ndarray,
    ib: np.ndarray,
    width: float | None = None,
) -> np.ndarray:
    """:func:`pair_values` of the pairs ``(ia, ib)`` (M,) of a frame's boxes (N, 4) ``x y w h``.

    The displacement A -> B is the centre x difference (wrapped when ``width`` is a panorama's width) and
    the box-bottom difference; ``facing`` = :func:`person_orientation` of the N people. Returns (M, 6).
    """
    vec, conf = facing
    cx = boxes[:, 0] + boxes[:, 2] / 2
    bottom = boxes[:, 1] + boxes[:, 3]
    delta = np.stack([wrap_delta(cx[ib] - cx[ia], width), bottom[ib] - bottom[ia]], axis=1)
    return pair_values(vec[ia], conf[ia], vec[ib], conf[ib], delta)


def frame_pair_values(
    boxes: np.ndarray,
    facing: tuple[np.ndarray, np.ndarray],
    ia: np.ndarray,
    ib: np.ndarray,
    width: float | None = None,
) -> list[np.ndarray]:
    """:func:`box_pair_values` as 6 contiguous (M,) float64 columns, the per-person rows gathered once
    (cheaper at thousands of pairs; the same values)."""
    vec, conf = facing
    person = np.stack([boxes[:, 0] + boxes[:, 2] / 2, boxes[:, 1] + boxes[:, 3], vec[:, 0], vec[:, 1], conf])
    (cxa, ba, fax, fay, ca), (cxb, bb, fbx, fby, cb) = (
        np.take(person, ia, axis=1),
        np.take(person, ib, axis=1),
    )
    dx, dy = wrap_delta(cxb - cxa, width), bb - ba
    dist = np.maximum(np.hypot(dx, dy), EPS)
    ux, uy = dx / dist, dy / dist
    known = np.minimum(ca, cb)
    unknown = ~(known > 0)
    a_to_b = fax * ux + fay * uy
    b_to_a = -(fbx * ux + fby * uy)
    cos = np.minimum(np.maximum(fax * fbx + fay * fby, -1.0), 1.0)  # np.clip, without its dispatch cost
    columns = [
        np.maximum(a_to_b, b_to_a),
        np.minimum(a_to_b, b_to_a),
        cos,
        np.arccos(cos) / np.pi,
        (np.abs(a_to_b) + np.abs(b_to_a)) / 2,
    ]
    if unknown.any():
        for c in columns:
            c[unknown] = 0.0
    return columns + [known]
