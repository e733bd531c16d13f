"""The motion in simulated frames is real: optical flow agrees with the ground truth (loose, fast check;
benchmarks/check_sim_flow.py measures it on longer runs)."""

from __future__ import annotations

import numpy as np
from pairedge.measure.sim import simulate
from pairedge.measure.sim.flowcheck import background_flow_errors, person_flow_errors, summary


def test_person_flow_matches_box_displacement_on_static() -> None:
    errors = person_flow_errors(simulate("static", seed=3, frames=12))
    moving = errors.displacement > 1.0
    assert moving.sum() >= 10, "walkers are in view"
    assert summary(errors.box)["median"] < 1.5
    assert summary(errors.person[moving])["median"] < 2.0
    assert summary(errors.pelvis[moving])["median"] < 1.0
    # the check is sensitive: a frame offset of one frame would be far off
    assert np.median(errors.displacement[moving]) > 1.0


def test_background_flow_matches_camera_motion_on_moving() -> None:
    rows = background_flow_errors(simulate("moving", seed=0, frames=8))
    assert rows[:, 1].max() > 0.5, "the camera moves"
    assert np.median(rows[:, 0]) < 0.3
