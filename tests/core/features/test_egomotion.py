"""Ego-motion on rendered frames: the simulator's moving camera (lawnmower) with real DIS optical flow."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from pairedge.core.features import egomotion, get_spec

sim = pytest.importorskip("pairedge.measure.sim")


def frames_and_flows(preset: str, seed: int, n: int, scale: float = 0.5):
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    prev = None
    for frame in sim.simulate(preset, seed=seed, frames=n):
        gray = cv2.resize(cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY), None, fx=scale, fy=scale)
        yield frame, (None if prev is None else dis.calc(prev, gray, None))
        prev = gray


def test_affine_ego_motion_matches_the_true_camera_motion():
    errors = {m: [] for m in egomotion.METHODS}
    for frame, flow in frames_and_flows("moving", seed=3, n=15):
        if flow is None:
            continue
        centres = frame.truth.boxes[:, :2] + frame.truth.boxes[:, 2:] / 2
        true = egomotion.displacement(frame.camera_motion, centres)
        for method in egomotion.METHODS:
            est = egomotion.estimate(flow, frame.detections.boxes, 0.5, method)
            errors[method].append(np.hypot(*(egomotion.displacement(est, centres) - true).T).mean())
    mean = {m: float(np.mean(v)) for m, v in errors.items()}
    assert mean["affine"] < 0.3  # pixels per frame at the people's centres
    assert mean["affine"] < 0.5 * mean["median"] < mean["none"]


def test_standing_people_have_small_motion_on_a_moving_camera():
    """With ego-motion removed, the flow motion of people standing still is close to zero."""
    spec = get_spec("pairedge")
    comp = spec.make_extractor({"ego_motion": "affine"})
    raw = spec.make_extractor({"ego_motion": "none"})
    still_c, still_r = [], []
    for frame, flow in frames_and_flows("moving", seed=3, n=15):
        size = frame.image.shape[1], frame.image.shape[0]
        a = comp.step(frame.truth, frame.timestamp, size, flow, 0.5)
        b = raw.step(frame.truth, frame.timestamp, size, flow, 0.5)
        if flow is None or not len(a):
            continue
        still = np.hypot(*frame.velocities.T) < 0.05  # m/s on the ground
        rows = np.flatnonzero(still)
        vx = a.stage2[:, spec.stage2_names.index("a_speed")]
        vr = b.stage2[:, spec.stage2_names.index("a_speed")]
        ida = frame.truth.track_ids[rows]
        pick = np.isin(a.pairs[:, 0], ida)
        still_c += vx[pick].tolist()
        still_r += vr[pick].tolist()
    if not still_c:
        pytest.skip("no standing person in this scene")
    assert np.median(still_c) < 0.5 * np.median(still_r)


@pytest.mark.parametrize("contiguous", [False, True])
def test_background_samples_are_the_grid_points_outside_every_enlarged_box(contiguous: bool) -> None:
    # the definition, point by point: a grid sample is background unless it lies in a box enlarged by
    # BOX_MARGIN of its size on each side (x0 <= x < x1, in flow pixels)
    rng = np.random.default_rng(3)
    flow = rng.normal(size=(60, 80, 2)).astype(np.float32)
    boxes = np.array([[10.0, 20.0, 30.0, 60.0], [100.0, 0.0, 20.0, 40.0], [40.0, 50.0, 16.0, 32.0]])
    scale, step = 0.5, 8
    ys, xs = egomotion.grid_axes(60, 80, step)
    grid = flow[step // 2 :: step, step // 2 :: step]
    if contiguous:  # the layout a device-side reduction hands over (PooledFlow)
        grid = np.ascontiguousarray(grid)
    points, vectors = egomotion.grid_background(grid, ys, xs, boxes, scale, min_points=5)
    want_p, want_v = [], []
    m = egomotion.BOX_MARGIN
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            inside = any(
                bx * scale - bw * scale * m <= x < bx * scale + bw * scale + bw * scale * m
                and by * scale - bh * scale * m <= y < by * scale + bh * scale + bh * scale * m
                for bx, by, bw, bh in boxes
            )
            if not inside:
                want_p.append((x, y))
                want_v.append(grid[i, j])
    assert 5 <= len(want_p) < len(ys) * len(xs)
    assert points.dtype == np.float32 and vectors.dtype == np.float32
    np.testing.assert_array_equal(points, np.array(want_p, np.float32))
    np.testing.assert_array_equal(vectors, np.array(want_v, np.float32))
    # too few background samples: every grid sample instead
    allp, allv = egomotion.grid_background(grid, ys, xs, boxes, scale, min_points=len(want_p) + 1)
    assert len(allp) == len(ys) * len(xs)
    np.testing.assert_array_equal(allv, np.asarray(grid, np.float32).reshape(-1, 2))
    np.testing.assert_array_equal(egomotion.background_samples(flow, boxes, scale, step, 5)[1], vectors)
