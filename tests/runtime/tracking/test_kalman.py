"""The tracker's Kalman filter against the textbook dense-matrix equations, and the appearance vectors."""

from __future__ import annotations

import numpy as np
from pairedge.runtime.tracking import appearance, kalman


def reference(x, p, z, dt, noise: kalman.MotionNoise):
    """One predict + update with explicit F, Q, H, R matrices."""
    f = np.eye(8)
    f[:4, 4:] = np.eye(4) * dt
    h = max(x[3], 1.0)
    steps = dt * kalman.REFERENCE_RATE
    q = np.diag(
        [(noise.position * h) ** 2 * steps] * 4
        + [(noise.velocity * h * kalman.REFERENCE_RATE) ** 2 * steps] * 4
    )
    x, p = f @ x, f @ p @ f.T + q
    hm = np.zeros((4, 8))
    hm[:, :4] = np.eye(4)
    r = np.eye(4) * (noise.measurement * max(x[3], 1.0)) ** 2
    k = p @ hm.T @ np.linalg.inv(hm @ p @ hm.T + r)
    return x + k @ (z - hm @ x), (np.eye(8) - k @ hm) @ p


def test_predict_and_update_equal_the_textbook_filter() -> None:
    noise = kalman.MotionNoise()
    rng = np.random.default_rng(1)
    boxes = np.column_stack(
        [rng.uniform(0, 500, (5, 2)), rng.uniform(20, 60, (5, 1)), rng.uniform(50, 150, (5, 1))]
    )
    x, p = kalman.initial(boxes, noise)
    x[:, 4:6] = rng.normal(0, 30, (5, 2))
    dt = rng.uniform(0.05, 0.3, 5)
    z_boxes = boxes + rng.normal(0, 3, boxes.shape)
    z = np.concatenate([z_boxes[:, :2] + z_boxes[:, 2:] / 2, z_boxes[:, 2:]], axis=1)
    want = [reference(x[i].copy(), p[i].copy(), z[i], dt[i], noise) for i in range(5)]
    kalman.predict(x, p, dt, noise)
    kalman.update(x, p, z_boxes, noise)
    for i in range(5):
        np.testing.assert_allclose(x[i], want[i][0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(p[i], want[i][1], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(kalman.boxes_of(x)[:, 2:], x[:, 2:4])


def test_appearance_is_a_unit_bhattacharyya_vector() -> None:
    frame = np.zeros((200, 200, 3), np.uint8)
    frame[:, :100] = (0, 0, 220)
    frame[:, 100:] = (220, 0, 0)
    emb = appearance.embed(
        frame, np.array([[10, 10, 60, 150], [20, 30, 50, 120], [120, 10, 60, 150], [0, 0, 1, 1]])
    )
    assert emb.shape == (4, appearance.SIZE)
    np.testing.assert_allclose(np.linalg.norm(emb[:3], axis=1), 1, rtol=1e-6)
    assert emb[0] @ emb[1] > 0.99 and emb[0] @ emb[2] < 0.01 and not emb[3].any()
