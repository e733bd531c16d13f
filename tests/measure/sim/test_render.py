"""Rendering: boxes are tight around the rendered people, occlusion and truncation, panorama wrap-around."""

from __future__ import annotations

import dataclasses

import numpy as np
from pairedge.measure.sim import LightingConfig, Scene, SimConfig, get_preset


def _config(name: str, *, people: int | None = None, **camera: object) -> SimConfig:
    cfg = get_preset(name)
    crowd = cfg.crowd if people is None else dataclasses.replace(cfg.crowd, people=people)
    return dataclasses.replace(
        cfg,
        camera=dataclasses.replace(cfg.camera, **camera),
        crowd=crowd,
        lighting=LightingConfig(gain_amplitude=0.0),  # frame = background + people, pixel for pixel
    )


def test_boxes_are_the_exact_extent_of_each_rendered_mask() -> None:
    scene = Scene(_config("static", people=14, width=320, height=240), seed=5)
    checked = 0
    for f in scene.frames(8):
        for k, tid in enumerate(f.truth.track_ids.tolist()):
            ys, xs = np.nonzero(f.mask(tid))
            x, y, w, h = f.truth.boxes[k].tolist()
            assert (x, y, x + w - 1, y + h - 1) == (xs.min(), ys.min(), xs.max(), ys.max())
            checked += 1
    assert checked > 50


def test_masks_are_where_the_people_were_painted() -> None:
    """Independent of the instance buffer: pixels that differ from the empty background are people or
    benches, and each person's painted pixels reach every side of its box."""
    scene = Scene(_config("static", people=12, width=320, height=240), seed=2)
    background = scene.renderer.background(np.array([[1.0, 0, 0], [0, 1.0, 0]]))
    f = scene.next_frame()
    changed = (f.image != background).any(2)
    people = f.instance_map > 0
    bench = changed & ~people
    assert bench.sum() < 0.05 * changed.size  # only the benches are painted outside the people
    for k, tid in enumerate(f.truth.track_ids.tolist()):
        ys, xs = np.nonzero(f.mask(tid) & changed)
        x, y, w, h = f.truth.boxes[k].astype(int).tolist()
        # textures can coincide with the background on a pixel, never along a whole box side
        assert abs(xs.min() - x) <= 1 and abs(ys.min() - y) <= 1
        assert abs(xs.max() - (x + w - 1)) <= 1 and abs(ys.max() - (y + h - 1)) <= 1


def test_occluded_and_cut_people_have_smaller_boxes() -> None:
    scene = Scene(_config("crowd", people=60, width=320, height=180), seed=1)
    occluded = truncated = 0
    for f in scene.frames(40):
        occluded += int((f.visibility < 0.9).sum())
        truncated += int(f.truncated.sum())
        b = f.truth.boxes
        assert (b[:, 0] >= 0).all() and (b[:, 1] >= 0).all()
        assert (b[:, 0] + b[:, 2] <= 320).all() and (b[:, 1] + b[:, 3] <= 180).all()
        assert set(f.truth.track_ids.tolist()) <= set(f.instance_ids.tolist())
    assert occluded > 0, "a crowd has occluded people"
    assert truncated > 0, "people entering a crowd are cut by the image border"


def test_panorama_boxes_wrap_around_the_seam() -> None:
    width = 600
    scene = Scene(_config("panorama", people=40, width=width, height=120), seed=6)
    wrapped = 0
    for k in range(6):
        # turn the robot so that one person stands on the seam (the right edge continues at the left)
        p = scene.world.people
        row = np.flatnonzero(p.alive)[k]
        u = scene.proj.project(np.array([p.pos[row, 0], 1.0, p.pos[row, 1]]))[0][0]
        tx = (width - 1 - u) % width
        scene.ego.affine = lambda t, tx=tx: np.array([[1.0, 0, round(tx)], [0, 1.0, -scene.proj.origin[1]]])
        f = scene.next_frame()
        b = f.truth.boxes
        assert (b[:, 0] >= 0).all() and (b[:, 0] < width).all()
        for i, tid in enumerate(f.truth.track_ids.tolist()):
            x, y, w, h = b[i].astype(int).tolist()
            ys, xs = np.nonzero(f.mask(tid))
            cols = np.arange(x, x + w) % width
            assert set(xs.tolist()) <= set(cols.tolist())
            assert cols[0] in xs and cols[-1] in xs
            assert (ys.min(), ys.max()) == (y, y + h - 1)
            wrapped += int(x + w > width)
        sticks = f.stickmen
        assert (sticks[..., 0::2] > -width / 2).all() and (sticks[..., 0::2] < 1.5 * width).all()
    assert wrapped >= 3, "the people put on the seam have wrapped boxes"


def test_camera_motion_is_identity_for_a_static_camera_and_moves_for_moving() -> None:
    still = Scene(_config("static", width=160, height=120), seed=0)
    for f in still.frames(3):
        assert np.allclose(f.camera_motion, [[1, 0, 0], [0, 1, 0]])
    moving = Scene(_config("moving", width=212, height=120), seed=0)
    shifts = [np.abs(f.camera_motion[:, 2]).max() for f in moving.frames(10)]
    assert shifts[0] < 1e-9 and max(shifts) > 0.2
