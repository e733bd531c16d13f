"""Ego-motion on rendered frames: the simulator's moving camera (lawnmower) with real DIS optical flow."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from pairedge.core.features import egomotion, get_spec

sim = pytest.importorskip("pairedge.core.sim")


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
