"""The randomized ``surveillance`` simulator family (elevated cameras for the default model)."""

from __future__ import annotations

import numpy as np
from pairedge.measure.sim import Scene, get_preset, simulate
from pairedge.measure.sim.config import RANDOMIZED, surveillance_config


def test_surveillance_camera_is_drawn_from_the_seed() -> None:
    assert "surveillance" in RANDOMIZED
    a, b = surveillance_config(3), surveillance_config(3)
    assert a == b and get_preset("surveillance", 3) == a
    cams = {surveillance_config(s).camera for s in range(12)}
    assert len(cams) == 12
    for s in range(12):
        c = surveillance_config(s)
        assert 2.5 <= c.camera.height_m <= 12 and c.camera.horizon <= 0.3
        near, far = c.crowd.depth_m
        assert far - near >= 6
    assert Scene("surveillance", 5).config == surveillance_config(5)


def test_surveillance_people_sizes() -> None:
    heights = [h for f in simulate("surveillance", seed=1, frames=3) for h in f.truth.boxes[:, 3].tolist()]
    assert heights and 12 <= np.median(heights) <= 400
