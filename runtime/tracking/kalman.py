"""A constant-velocity Kalman filter over boxes, vectorised over tracks (SORT / ByteTrack's motion model).

State per track ``cx cy w h vx vy vw vh`` (pixels and pixels per second), measured ``cx cy w h``. Time is in
seconds, so one filter serves any frame rate and a dropped frame is a longer step, not a lost one. Noise is
relative to the box height, as in ByteTrack (its ``std_weight_position`` 1/20 and ``std_weight_velocity``
1/160 per frame): the process noise of a step of ``dt`` seconds has variance
``(position_noise * h)^2 * dt * rate`` on the box and ``(velocity_noise * h * rate)^2 * dt * rate`` on its
velocity, ``rate`` being :data:`REFERENCE_RATE` frames per second, so at that rate a step adds exactly
ByteTrack's per-frame noise; the measurement noise is ``(measurement_noise * h)^2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The frame rate at which the noise settings equal ByteTrack's per-frame ones (its MOT17 data: 30 fps is
#: the common rate, but the PETS / simulator streams pairedge is tuned on run at 10; the settings are chosen
#: at this rate).
REFERENCE_RATE = 10.0


@dataclass(frozen=True)
class MotionNoise:
    """Noise of the filter, relative to the box height (see the module docstring)."""

    position: float = 1 / 20
    velocity: float = 1 / 160
    measurement: float = 1 / 20


def initial(boxes: np.ndarray, noise: MotionNoise) -> tuple[np.ndarray, np.ndarray]:
    """State (N, 8) and covariance (N, 8, 8) of new tracks at their boxes (N, 4) ``x y w h``, at rest."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    x = np.zeros((len(b), 8))
    x[:, 0:2] = b[:, 0:2] + b[:, 2:4] / 2
    x[:, 2:4] = b[:, 2:4]
    h = np.maximum(b[:, 3], 1.0)
    sd = np.concatenate(
        [
            np.repeat((2 * noise.position * h)[:, None], 4, 1),
            np.repeat((10 * noise.velocity * h * REFERENCE_RATE)[:, None], 4, 1),
        ],
        axis=1,
    )
    cov = np.zeros((len(b), 8, 8))
    idx = np.arange(8)
    cov[:, idx, idx] = sd**2
    return x, cov


def predict(x: np.ndarray, cov: np.ndarray, dt: np.ndarray, noise: MotionNoise) -> None:
    """Move states (N, 8) and covariances (N, 8, 8) forward by ``dt`` (N,) seconds, in place."""
    if len(x) == 0:
        return
    d = np.clip(np.asarray(dt, np.float64), 0.0, None)
    x[:, 0:4] += x[:, 4:8] * d[:, None]
    p11, p12, p21, p22 = cov[:, :4, :4], cov[:, :4, 4:], cov[:, 4:, :4], cov[:, 4:, 4:]
    dd = d[:, None, None]
    new11 = p11 + dd * (p12 + p21) + dd * dd * p22
    new12 = p12 + dd * p22
    new21 = p21 + dd * p22
    cov[:, :4, :4], cov[:, :4, 4:], cov[:, 4:, :4] = new11, new12, new21
    h = np.maximum(x[:, 3], 1.0)
    steps = d * REFERENCE_RATE
    q_pos = (noise.position * h) ** 2 * steps
    q_vel = (noise.velocity * h * REFERENCE_RATE) ** 2 * steps
    for k in range(4):
        cov[:, k, k] += q_pos
        cov[:, 4 + k, 4 + k] += q_vel


def update(x: np.ndarray, cov: np.ndarray, boxes: np.ndarray, noise: MotionNoise) -> None:
    """Correct states (M, 8) and covariances (M, 8, 8) with measured boxes (M, 4) ``x y w h``, in place."""
    if len(x) == 0:
        return
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    z = np.concatenate([b[:, 0:2] + b[:, 2:4] / 2, b[:, 2:4]], axis=1)
    h = np.maximum(x[:, 3], 1.0)
    s = cov[:, :4, :4].copy()
    idx = np.arange(4)
    s[:, idx, idx] += ((noise.measurement * h) ** 2)[:, None]
    gain = np.linalg.solve(s, cov[:, :4, :]).transpose(0, 2, 1)  # (M, 8, 4): P H^T S^-1 (S symmetric)
    x += np.einsum("mij,mj->mi", gain, z - x[:, :4])
    cov -= np.einsum("mij,mjk->mik", gain, cov[:, :4, :])


def boxes_of(x: np.ndarray) -> np.ndarray:
    """(N, 4) ``x y w h`` of states (N, 8); sizes kept >= 1 pixel."""
    wh = np.maximum(x[:, 2:4], 1.0)
    return np.concatenate([x[:, 0:2] - wh / 2, wh], axis=1)
