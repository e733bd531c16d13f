"""Label consistency: what the labels say is what the people do (in the world and in the image)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pairedge.core.labels import SIM7
from pairedge.measure.sim import Scene, SimFrame, get_preset

WALK, STAND, SIT = (SIM7.index(n) for n in ("walking_together", "standing_together", "sitting_together"))


@pytest.fixture(scope="module")
def run() -> tuple[Scene, list[SimFrame]]:
    cfg = get_preset("static")
    cfg = dataclasses.replace(
        cfg,
        camera=dataclasses.replace(cfg.camera, width=320, height=240),
        crowd=dataclasses.replace(cfg.crowd, people=14, event_s=4.0),
    )
    scene = Scene(cfg, seed=0)
    return scene, list(scene.frames(150))


def _rows(f: SimFrame) -> dict[int, int]:
    return {int(t): k for k, t in enumerate(f.truth.track_ids.tolist())}


def _pairs_with(frames: list[SimFrame], label: int) -> list[tuple[SimFrame, int, int]]:
    out = []
    for f in frames:
        rows = _rows(f)
        for (a, b), lab in zip(f.pairs.tolist(), f.pair_labels.tolist(), strict=True):
            if lab == label:
                out.append((f, rows[a], rows[b]))
    return out


def test_every_label_occurs(run: tuple[Scene, list[SimFrame]]) -> None:
    counts = np.bincount(np.concatenate([f.pair_labels for f in run[1]]), minlength=len(SIM7))
    assert (counts > 0).all(), dict(zip(SIM7.classes, counts.tolist(), strict=True))


def test_walking_together_pairs_move_in_parallel_at_similar_speed(run: tuple[Scene, list[SimFrame]]) -> None:
    cos, ratio, dist = [], [], []
    for f, a, b in _pairs_with(run[1], WALK):
        va, vb = f.velocities[a], f.velocities[b]
        sa, sb = np.hypot(*va), np.hypot(*vb)
        if min(sa, sb) > 0.5:
            cos.append(va @ vb / (sa * sb))
            ratio.append(sa / sb)
            dist.append(np.hypot(*(f.positions[a] - f.positions[b])))
    assert len(cos) > 50
    assert np.median(cos) > 0.98 and np.percentile(cos, 10) > 0.8
    assert 0.85 < np.median(ratio) < 1.18
    assert np.median(dist) < 1.5


def _distance_change(frames: list[SimFrame], label: int) -> np.ndarray:
    """Ground-distance change of each labelled pair from one frame to the next (same pair, same label)."""
    out = []
    for f, g in zip(frames, frames[1:], strict=False):
        now = {tuple(p): k for k, p in enumerate(g.pairs.tolist()) if g.pair_labels[k] == label}
        rf, rg = _rows(f), _rows(g)
        for k, (a, b) in enumerate(f.pairs.tolist()):
            if f.pair_labels[k] == label and (a, b) in now:
                d0 = np.hypot(*(f.positions[rf[a]] - f.positions[rf[b]]))
                d1 = np.hypot(*(g.positions[rg[a]] - g.positions[rg[b]]))
                out.append(d1 - d0)
    return np.asarray(out)


def test_approaching_pairs_get_closer_and_leaving_pairs_apart(run: tuple[Scene, list[SimFrame]]) -> None:
    closer = _distance_change(run[1], SIM7.index("approaching"))
    apart = _distance_change(run[1], SIM7.index("leaving"))
    assert len(closer) > 20 and len(apart) > 20
    assert (closer < 0).mean() > 0.8 and np.median(closer) < -0.03  # detours around benches and people
    # a leaver may still be getting up (distance unchanged) but never comes back
    assert (apart < -1e-4).mean() < 0.05 and np.median(apart) > 0.03


def test_passing_by_pairs_are_near_and_one_walks(run: tuple[Scene, list[SimFrame]]) -> None:
    radius = run[0].config.crowd.pass_radius_m
    pairs = _pairs_with(run[1], SIM7.index("passing_by"))
    assert pairs
    for f, a, b in pairs:
        assert np.hypot(*(f.positions[a] - f.positions[b])) < radius
        assert max(np.hypot(*f.velocities[a]), np.hypot(*f.velocities[b])) > 0.3


def test_together_pairs_are_exactly_the_pairs_inside_groups(run: tuple[Scene, list[SimFrame]]) -> None:
    for f in run[1]:
        inside = {}
        for g in f.groups:
            members = g.members.tolist()
            for i, a in enumerate(members):
                for b in members[i + 1 :]:
                    inside[(a, b)] = SIM7.index(g.activity)
        together = {
            tuple(p): int(k) for p, k in zip(f.pairs.tolist(), f.pair_labels, strict=True) if k <= SIT
        }
        assert together == inside


def test_sitting_boxes_are_shorter_and_lower_than_standing(run: tuple[Scene, list[SimFrame]]) -> None:
    scene, frames = run
    proj = scene.proj
    height = {0: [], 1: [], 2: []}
    top = {0: [], 1: [], 2: []}
    for f in frames:
        for k in range(len(f.truth)):
            if f.visibility[k] < 0.95 or f.truncated[k]:
                continue
            posture = int(np.argmax(f.actions[k, :3]))  # walking, standing, sitting
            depth = float(f.positions[k, 1])
            x, y, w, h = f.truth.boxes[k].tolist()
            height[posture].append(h * depth / proj.f)  # metres
            top[posture].append(proj.height_m + (proj.cy - y) * depth / proj.f)  # metres above the ground
    assert len(height[1]) > 20 and len(height[2]) > 20
    assert np.median(height[2]) < 0.9 * np.median(height[1])
    assert np.median(top[2]) < np.median(top[1]) - 0.25
    assert 1.5 < np.median(height[1]) < 1.95  # standing adults are 1.5 .. 1.95 m tall


def test_actions_are_consistent_with_motion(run: tuple[Scene, list[SimFrame]]) -> None:
    for f in run[1][1:]:
        speed = np.hypot(f.velocities[:, 0], f.velocities[:, 1])
        posture = f.actions[:, :3]
        assert (posture.sum(1) == 1).all()  # exactly one of walking / standing / sitting
        assert (speed[posture[:, 0]] > 0.3).all()
        assert (speed[posture[:, 2]] < 0.3).all()
        social = f.actions[:, 3] | f.actions[:, 4]
        in_group = np.isin(
            f.truth.track_ids, np.concatenate([g.members for g in f.groups] + [np.zeros(0, int)])
        )
        assert (social[in_group]).all()
