"""Simulator scenes as CAD sequences (benchmark-only training rows): labels, boxes, orientation bins."""

from __future__ import annotations

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.labels import CAD8, SIM7
from pairedge.export.datasets.sim_cad import SIM_TO_CAD, sim_cad_sequence, to_cad_bin
from pairedge.measure.sim import simulate


def test_heading_to_cad_bins_by_hand() -> None:
    # world heading h faces (sin h, cos h) in ground (X, Z); the camera looks along +Z
    h = np.array([0.0, np.pi, np.pi / 2, -np.pi / 2, np.pi / 4, 3 * np.pi / 4])
    # away from the camera = back (7); toward it = front (3); +X = image right (1); -X = left (5);
    # away and right = back-right (8); toward and right = front-right (2)
    assert to_cad_bin(h).tolist() == [7, 3, 1, 5, 8, 2]


@pytest.fixture(scope="module")
def scene():
    frames = list(simulate("static", seed=0, frames=60))
    return frames, sim_cad_sequence("static", 0, frames=60, number=7)


def test_boxes_presence_and_labels_follow_the_simulator(scene) -> None:
    frames, seq = scene
    assert seq.num_frames == 60 and seq.sequence == 7 and seq.fps == 15.0
    assert (seq.labels == np.swapaxes(seq.labels, 1, 2)).all()
    mapped = 0
    for f, frame in enumerate(frames, start=1):
        det = seq.detections(f, orientation=False)
        # track k of the sequence is the k-th simulator id seen: same boxes, same order by id
        assert len(det) == len(frame.truth)
        order = np.argsort(det.track_ids)
        np.testing.assert_array_equal(det.boxes[order], frame.truth.boxes)
        ids = dict(zip(frame.truth.track_ids.tolist(), det.track_ids[order].tolist(), strict=True))
        two = {
            tuple(g.members.tolist())
            for g in frame.groups
            if g.activity == "standing_together" and len(g.members) == 2
        }
        for (a, b), lab in zip(frame.pairs.tolist(), frame.pair_labels.tolist(), strict=True):
            got = int(seq.labels_for(f, np.array([[ids[a], ids[b]]]))[0])
            name = SIM7.classes[lab]
            if (a, b) in two:
                want = CAD8.index("facing_each_other")
            else:
                want = CAD8.index(SIM_TO_CAD[name]) if name in SIM_TO_CAD else -1
            assert got == want
            mapped += got >= 0
    assert mapped > 100
    # unlabelled where a person is absent
    absent = ~seq.present
    assert (seq.labels[absent] == -1).all()


def test_the_scene_has_the_classes_the_mapping_promises(scene) -> None:
    _, seq = scene
    present = set(np.unique(seq.labels[seq.labels >= 0]).tolist())
    assert CAD8.index("no_interaction") in present
    assert not present & {CAD8.index("standing_in_a_row"), CAD8.index("standing_side_by_side")}


def test_orientation_and_action_columns(scene) -> None:
    _, seq = scene
    for p in seq.people:
        assert ((p.pose >= 1) & (p.pose <= 8)).all()
        assert np.isin(p.action, (0, 1)).all()
        assert len(p.frames) == len(p.boxes) == len(p.pose)
    det = seq.detections(1)
    assert det.orientation is not None and np.isfinite(det.orientation).all()


def test_bad_requests() -> None:
    with pytest.raises(InputError, match="frames >= 2"):
        sim_cad_sequence("static", 0, frames=1)
    with pytest.raises(InputError, match="panorama"):
        sim_cad_sequence("panorama", 0, frames=3)
