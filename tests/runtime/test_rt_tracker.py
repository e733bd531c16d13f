"""Built-in IoU + motion tracker: synthetic motion, coasting, death, bounded state, and real PETS detections."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.runtime.tracker import IoUTracker, TrackerConfig, greedy_assign, iou_matrix, nms_keep


def test_iou_matrix_and_nms() -> None:
    a = np.array([[0, 0, 10, 10], [100, 100, 5, 5]], float)
    b = np.array([[5, 0, 10, 10], [0, 0, 10, 10], [200, 0, 1, 1]], float)
    iou = iou_matrix(a, b)
    np.testing.assert_allclose(iou[0], [50 / 150, 1.0, 0.0])
    assert (iou[1] == 0).all()
    keep = nms_keep(
        np.array([[0, 0, 10, 10], [1, 0, 10, 10], [50, 0, 10, 10]], float), np.array([0.5, 0.9, 0.1]), 0.5
    )
    assert keep.tolist() == [False, True, True]


def test_greedy_assignment_prefers_highest_score() -> None:
    score = np.array([[0.9, 0.8], [0.85, 0.1]])
    rows, cols = greedy_assign(score, score > 0.05)
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == [(0, 0), (1, 1)]


def _walk(start: tuple[float, float], velocity: tuple[float, float], t: float) -> list[float]:
    return [start[0] + velocity[0] * t, start[1] + velocity[1] * t, 40.0, 100.0]


@pytest.mark.parametrize("rescue", [True, False])
def test_two_people_crossing_keep_their_ids(rescue: bool) -> None:
    tracker = IoUTracker(TrackerConfig(rescue_suppressed=rescue))
    first, hidden = None, 0
    for k in range(40):
        t = k / 10
        boxes = np.array([_walk((0, 100), (60, 0), t), _walk((300, 112), (-60, 0), t)])
        ids = tracker.step(boxes[::-1] if k % 2 else boxes, t)  # order of detections must not matter
        ids = ids[::-1] if k % 2 else ids
        if first is None:
            first = ids.copy()
        seen = ids >= 0  # without the rescue, duplicate suppression hides one of them while they overlap
        assert seen.any()
        np.testing.assert_array_equal(ids[seen], first[seen])
        hidden += int((~seen).sum())
    assert (hidden == 0 if rescue else 0 < hidden < 8) and tracker.num_tracks == 2


def test_fast_mover_is_followed_by_the_motion_model() -> None:
    # 25 px per frame with 40 px wide boxes: IoU with the last box drops near the gate, the prediction holds it
    tracker = IoUTracker()
    ids = {int(tracker.step(np.array([_walk((0, 0), (250, 0), k / 10)]), k / 10)[0]) for k in range(30)}
    assert ids == {1}


def test_coasting_through_missed_frames_and_death() -> None:
    cfg = TrackerConfig(max_age=3)
    tracker = IoUTracker(cfg)
    box = lambda k: np.array([_walk((0, 0), (20, 0), k / 10)])  # noqa: E731
    assert tracker.step(box(0), 0.0)[0] == 1
    assert tracker.step(box(1), 0.1)[0] == 1
    for k in (2, 3, 4):
        assert len(tracker.step(np.zeros((0, 4)), k / 10)) == 0
    assert tracker.step(box(5), 0.5)[0] == 1  # unseen for 3 frames: still alive, predicted forward
    for k in range(6, 10):
        tracker.step(np.zeros((0, 4)), k / 10)
    assert tracker.num_tracks == 0
    assert tracker.step(box(10), 1.0)[0] == 2  # unseen for 4 > max_age frames: a new identity


def test_state_is_bounded() -> None:
    tracker = IoUTracker(TrackerConfig(max_tracks=16, max_age=1000))
    rng = np.random.default_rng(0)
    for k in range(50):
        boxes = np.column_stack([rng.uniform(0, 5000, (10, 2)), np.full((10, 2), 20.0)])
        ids = tracker.step(boxes, k * 0.1)
        assert (ids > 0).all() and len(np.unique(ids)) == 10
        assert tracker.num_tracks <= 16
    assert tracker._box.shape == (16, 4)


def test_low_scores_do_not_start_tracks_and_duplicates_are_suppressed() -> None:
    tracker = IoUTracker(TrackerConfig(min_score=0.5))
    boxes = np.array([[0, 0, 40, 100], [2, 1, 40, 100], [500, 0, 40, 100]], float)
    ids = tracker.step(boxes, 0.0, np.array([0.9, 0.95, 0.2]))
    assert ids.tolist() == [-1, 1, -1]


def test_config_is_validated() -> None:
    with pytest.raises(InputError):
        TrackerConfig(min_iou=1.5)
    with pytest.raises(InputError):
        TrackerConfig(max_tracks=0)


def _mot(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", dtype=np.float64)


@pytest.mark.data
def test_pets_raw_detections_get_stable_ids(shared_data: Path) -> None:
    """Raw ACF detections of PETS09 S2L1 (7 fps, no ids): identity switches against the ground truth."""
    base = shared_data / "pets09_s2l1" / "mot15"
    gt, det = _mot(base / "gt" / "gt.txt"), _mot(base / "det" / "det.txt")
    tracker = IoUTracker()
    last: dict[int, int] = {}
    matches = switches = unassigned = 0
    for frame in range(1, 796):
        d, g = det[det[:, 0] == frame], gt[gt[:, 0] == frame]
        ids = tracker.step(d[:, 2:6], (frame - 1) / 7.0, d[:, 6])
        if len(d) == 0 or len(g) == 0:
            continue
        iou = iou_matrix(g[:, 2:6], d[:, 2:6])
        rows, cols = greedy_assign(iou, iou >= 0.5)
        for gi, di in zip(rows.tolist(), cols.tolist(), strict=True):
            matches += 1
            gid, tid = int(g[gi, 1]), int(ids[di])
            if tid < 0:
                unassigned += 1
                continue
            switches += int(gid in last and last[gid] != tid)
            last[gid] = tid
    print(f"PETS det.txt: {matches} matched boxes, {switches} id switches, {unassigned} without id")
    assert matches > 4000
    assert switches / matches < 0.03  # measured 68 / 4250 = 1.6 % (rescue_suppressed on: 109)
    assert unassigned / matches < 0.06  # duplicates suppressed; measured 149 / 4250 = 3.5 % (rescue on: 107)


def test_a_bad_nms_iou_is_refused() -> None:
    import pytest
    from pairedge.core.errors import InputError
    from pairedge.runtime.tracker import TrackerConfig

    for bad in (0.0, -0.1, 1.5, float("nan"), "0.5", True):
        with pytest.raises(InputError, match="nms_iou"):
            TrackerConfig(nms_iou=bad)  # type: ignore[arg-type]
    assert TrackerConfig(nms_iou=None).nms_iou is None and TrackerConfig(nms_iou=1).nms_iou == 1
