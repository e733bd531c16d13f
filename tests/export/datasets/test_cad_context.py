"""CAD benchmark context columns and label-preserving augmentations (synthetic sequences, fast)."""

from __future__ import annotations

import numpy as np
import pytest
from cad_synth import W, sequence  # noqa: E402
from pairedge.core.errors import InputError
from pairedge.core.io.cad import CadSequence
from pairedge.core.labels import CAD8
from pairedge.export.datasets.cad_context import (
    CONTEXT_NAMES,
    context_features,
    mirror_sequence,
    reverse_sequence,
)


def approaching_pair(frames: int = 150) -> CadSequence:
    """Two people 100 px tall walking toward each other at 0.5 height / s each (labelled approaching)."""
    t = np.arange(frames) / 30.0
    boxes = np.zeros((frames, 2, 4))
    boxes[:, 0] = np.stack(
        [100 + 50 * t, np.full(frames, 200.0), np.full(frames, 40.0), np.full(frames, 100.0)], 1
    )
    boxes[:, 1] = np.stack(
        [600 - 50 * t, np.full(frames, 200.0), np.full(frames, 40.0), np.full(frames, 100.0)], 1
    )
    labels = np.full((frames, 2, 2), -1)
    labels[:, 0, 1] = labels[:, 1, 0] = CAD8.index("approaching")
    return sequence(boxes, labels)


def col(name: str) -> int:
    return CONTEXT_NAMES.index(name)


def test_distance_change_is_causal_and_signed():
    seq = approaching_pair()
    frames = np.array([10, 40, 70, 140])
    out = context_features(seq, frames, np.array([[1, 2]] * 4))
    assert out.shape == (4, len(CONTEXT_NAMES)) and out.dtype == np.float32
    # 1 s ago known from frame 31 on; 4 s ago from frame 121 on
    np.testing.assert_array_equal(out[:, col("lag_1s_known")], [0, 1, 1, 1])
    np.testing.assert_array_equal(out[:, col("lag_4s_known")], [0, 0, 0, 1])
    # both walk 0.5 height/s toward each other: the distance shrinks by 1 height per second
    np.testing.assert_allclose(out[1:, col("dist_change_1s")], -1.0, atol=1e-4)
    np.testing.assert_allclose(out[3, col("dist_change_4s")], -1.0, atol=1e-4)
    assert out[0, col("dist_change_1s")] == 0.0
    # opposite directions after removing the median displacement (zero here): cosine -1, speed 0.5
    np.testing.assert_allclose(out[1:, col("comp_cosine")], -1.0, atol=1e-4)
    np.testing.assert_allclose(out[1:, col("comp_speed_min")], 0.5, atol=1e-4)


def test_camera_motion_is_removed():
    """Everyone standing, camera panning: the compensated speeds are 0 (the raw ones are not)."""
    nf = 60
    boxes = np.zeros((nf, 3, 4))
    pan = 3.0 * np.arange(nf)
    for k, x0 in enumerate((100, 300, 500)):
        boxes[:, k] = np.stack([x0 + pan, np.full(nf, 200.0), np.full(nf, 40.0), np.full(nf, 100.0)], 1)
    labels = np.full((nf, 3, 3), CAD8.index("no_interaction"))
    out = context_features(sequence(boxes, labels), np.array([50]), np.array([[1, 3]]))
    assert out[0, col("comp_speed_mean")] == pytest.approx(0.0, abs=1e-5)
    assert out[0, col("comp_cosine")] == 0.0


def test_queue_group_geometry():
    """Five people in a horizontal line 1 height apart: one linear group; the end pair has 3 between."""
    nf = 5
    boxes = np.zeros((nf, 6, 4))
    for k in range(5):
        boxes[:, k] = [100 + 100 * k, 200, 40, 100]
    boxes[:, 5] = [650, 20, 10, 20]  # far away and small: its own group
    labels = np.full((nf, 6, 6), CAD8.index("standing_in_a_row"))
    out = context_features(sequence(boxes, labels), np.array([3, 3, 3]), np.array([[1, 5], [1, 2], [1, 6]]))
    assert out[0, col("same_group")] == 1 and out[0, col("group_size")] == pytest.approx(0.5)
    assert out[0, col("group_linearity")] == pytest.approx(1.0, abs=1e-6)
    assert out[0, col("axis_alignment")] == pytest.approx(1.0, abs=1e-6)
    assert out[0, col("between_fraction")] == pytest.approx(1.0)
    assert out[1, col("between_fraction")] == 0.0
    assert out[2, col("same_group")] == 0 and out[2, col("group_size")] == 0


def test_symmetric_in_a_and_b():
    seq = approaching_pair()
    frames = np.array([40, 90])
    ab = context_features(seq, frames, np.array([[1, 2], [1, 2]]))
    ba = context_features(seq, frames, np.array([[2, 1], [2, 1]]))
    np.testing.assert_allclose(ab, ba, atol=1e-6)


def test_bad_rows_raise():
    seq = approaching_pair(10)
    with pytest.raises(InputError, match="frames"):
        context_features(seq, np.array([11]), np.array([[1, 2]]))
    with pytest.raises(InputError, match="track ids"):
        context_features(seq, np.array([3]), np.array([[1, 3]]))
    with pytest.raises(InputError, match="one each"):
        context_features(seq, np.array([3, 4]), np.array([[1, 2]]))


def test_mirror_is_an_involution_and_mirrors_bins():
    seq = approaching_pair(20)
    pose = np.tile(np.array([[1, 2]]), (20, 1))
    seq = sequence(seq.boxes.astype(np.float64), seq.labels.astype(np.int64), pose)
    m = mirror_sequence(seq)
    np.testing.assert_allclose(m.boxes[0, 0, 0], W - seq.boxes[0, 0, 0] - seq.boxes[0, 0, 2])
    assert m.people[0].pose[0] == 5 and m.people[1].pose[0] == 4  # right -> left, front-right -> front-left
    back = mirror_sequence(m)
    np.testing.assert_allclose(back.boxes, seq.boxes, atol=1e-3)
    for p, q in zip(back.people, seq.people, strict=True):
        np.testing.assert_array_equal(p.pose, q.pose)
    np.testing.assert_array_equal(m.labels, seq.labels)
    # the mirrored scene has the same distances: the distance change is unchanged
    frames, pairs = np.array([1, 19]), np.array([[1, 2], [1, 2]])
    np.testing.assert_allclose(
        context_features(m, frames, pairs), context_features(seq, frames, pairs), atol=1e-5
    )


def test_reverse_swaps_approaching_and_leaving():
    seq = approaching_pair(90)
    r = reverse_sequence(seq)
    assert (r.labels[:, 0, 1] == CAD8.index("leaving")).all()
    out = context_features(r, np.array([60]), np.array([[1, 2]]))
    assert out[0, col("dist_change_1s")] == pytest.approx(1.0, abs=1e-4)  # now moving apart
    back = reverse_sequence(r)
    np.testing.assert_allclose(back.boxes, seq.boxes)
    np.testing.assert_array_equal(back.labels, seq.labels)
    np.testing.assert_array_equal(back.people[0].frames, seq.people[0].frames)
