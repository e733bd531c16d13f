"""The in-memory simulator API: shapes, determinism, tight boxes, labels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.labels import SIM7
from pairedge.measure.sim import PRESETS, SIM_ACTIONS, CameraConfig, Scene, SimConfig, get_preset, simulate


def _small(name: str, **camera: object) -> SimConfig:
    """A preset shrunk for fast tests (same behaviour, smaller frames)."""
    cfg = get_preset(name)
    return dataclasses.replace(cfg, camera=dataclasses.replace(cfg.camera, **camera))


def _frames(cfg: SimConfig | str, seed: int, n: int) -> list:
    return list(simulate(cfg, seed=seed, frames=n))


def test_frame_fields_have_documented_shapes() -> None:
    frames = _frames("static", 0, 3)
    assert [f.index for f in frames] == [0, 1, 2]
    assert frames[1].timestamp == pytest.approx(1 / 15)
    f = frames[-1]
    n = len(f.truth)
    assert n > 0
    assert f.image.shape == (480, 640, 3) and f.image.dtype == np.uint8
    assert f.truth.boxes.dtype == np.float32 and f.truth.track_ids.dtype == np.int64
    assert np.all(np.diff(f.truth.track_ids) > 0)
    assert f.pairs.shape == (n * (n - 1) // 2, 2) and f.pairs.dtype == np.int64
    assert np.all(f.pairs[:, 0] < f.pairs[:, 1])
    assert f.pair_labels.shape == (len(f.pairs),) and f.pair_labels.max() < len(SIM7)
    assert f.actions.shape == (n, len(SIM_ACTIONS)) and f.actions.dtype == bool
    assert f.stickmen.shape == (n, 6, 4) and f.stickmen.dtype == np.float32
    assert f.camera_motion.shape == (2, 3)
    assert f.motion.shape == (n, 2) and f.positions.shape == (n, 2) and f.velocities.shape == (n, 2)
    assert f.visibility.shape == (n,) and np.all((f.visibility > 0) & (f.visibility <= 1))
    assert f.instance_map.shape == (480, 640)
    for g in f.groups:
        assert len(g.members) >= 2 and set(g.members.tolist()) <= set(f.truth.track_ids.tolist())


def test_each_posture_appears_in_the_static_scene() -> None:
    acts = np.concatenate([f.actions for f in _frames("static", 0, 2)])
    # walking, standing, sitting people are all present at the start of the static preset
    assert acts[:, :3].any(0).all()


def test_same_preset_and_seed_is_byte_identical() -> None:
    cfg = _small("moving", width=160, height=96)
    a, b = _frames(cfg, 7, 6), _frames(cfg, 7, 6)
    for fa, fb in zip(a, b, strict=True):
        assert fa.image.tobytes() == fb.image.tobytes()
        assert fa.truth.boxes.tobytes() == fb.truth.boxes.tobytes()
        assert fa.detections.boxes.tobytes() == fb.detections.boxes.tobytes()
        assert np.array_equal(fa.detections.track_ids, fb.detections.track_ids)
        assert np.array_equal(fa.pairs, fb.pairs) and np.array_equal(fa.pair_labels, fb.pair_labels)
        assert fa.stickmen.tobytes() == fb.stickmen.tobytes()
        assert np.array_equal(fa.camera_motion, fb.camera_motion)


def test_different_seed_differs() -> None:
    cfg = _small("static", width=160, height=120)
    a, b = _frames(cfg, 1, 1)[0], _frames(cfg, 2, 1)[0]
    assert a.image.tobytes() != b.image.tobytes()
    assert a.truth.boxes.tobytes() != b.truth.boxes.tobytes()


def test_every_preset_exists_and_bad_names_raise() -> None:
    assert set(PRESETS) >= {"static", "moving", "panorama", "crowd", "noisy"}
    assert 50 <= PRESETS["crowd"].crowd.people <= 100
    assert PRESETS["panorama"].camera.width == 3760 and PRESETS["panorama"].camera.height == 480
    with pytest.raises(InputError, match="unknown simulator preset"):
        Scene("nope", 0)
    with pytest.raises(InputError, match="seed"):
        Scene("static", -1)
    with pytest.raises(InputError, match="camera kind"):
        CameraConfig(kind="fisheye")
