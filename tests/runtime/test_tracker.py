"""The built-in tracker: ByteTrack's association (high boxes, then low ones, tentative tracks), the Kalman
motion model, the appearance cue, coasting, bounded state, and real PETS detections."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.boxes import iou_matrix, nms_keep
from pairedge.core.errors import InputError
from pairedge.core.types import Detections
from pairedge.runtime import Pipeline, PipelineConfig
from pairedge.runtime.tracker import IoUTracker, TrackerConfig
from rt_onnx_models import write_toy_model


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


def _walk(start: tuple[float, float], velocity: tuple[float, float], t: float) -> list[float]:
    return [start[0] + velocity[0] * t, start[1] + velocity[1] * t, 40.0, 100.0]


def test_first_frame_births_are_confirmed_later_ones_need_a_second_match() -> None:
    tracker = IoUTracker()
    a = np.array([_walk((0, 0), (0, 0), 0)])
    assert tracker.step(a, 0.0, np.array([0.9])).tolist() == [1]  # a stream's first frame: at once
    b = np.array([_walk((0, 0), (0, 0), 0), [400, 0, 40, 100]])
    assert tracker.step(b, 0.1, np.array([0.9, 0.9])).tolist() == [1, -1]  # tentative
    assert tracker.step(b, 0.2, np.array([0.9, 0.9])).tolist() == [1, 2]  # confirmed: its id now
    assert tracker.num_tracks == 2


def test_scores_decide_who_starts_and_who_continues() -> None:
    cfg = TrackerConfig()
    tracker = IoUTracker(cfg)
    box = np.array([[0, 0, 40, 100]], float)
    # a high box starts a tentative track; it is confirmed once one of its boxes is confident (new_score)
    assert tracker.step(box, 0.0, np.array([cfg.new_score - 0.01])).tolist() == [-1]
    assert tracker.num_tracks == 0
    assert tracker.step(box, 0.1, np.array([cfg.high_score])).tolist() == [-1]  # matched, still not confident
    assert tracker.step(box, 0.2, np.array([0.95])).tolist() == [1]
    # a partly hidden person scores low: the second stage keeps the track, a low box elsewhere starts nothing
    two = np.array([[1, 0, 40, 100], [300, 0, 40, 100]], float)
    assert tracker.step(two, 0.3, np.array([0.3, 0.3])).tolist() == [1, -1]
    assert tracker.step(two, 0.4, np.array([0.05, 0.95])).tolist() == [-1, -1]  # below low_score: ignored
    assert tracker.step(two[1:], 0.5, np.array([0.95])).tolist() == [2]  # the new one, matched twice


def test_a_persistent_unconfident_object_never_gets_an_id() -> None:
    """A sign a detector scores 0.6 frame after frame: tentative for ever, never a person."""
    tracker = IoUTracker(TrackerConfig(high_score=0.5))
    sign = np.array([[10, 10, 20, 40]], float)
    assert all(tracker.step(sign, k / 10, np.array([0.6])).tolist() == [-1] for k in range(30))
    assert tracker.num_tracks == 0


def test_margin_scores_count_as_high() -> None:
    """HOG's and ACF's SVM margins are no probabilities: every box may start and continue a track."""
    tracker = IoUTracker()
    boxes = np.array([[0, 0, 40, 100], [300, 0, 40, 100]], float)
    assert tracker.step(boxes, 0.0, np.array([35.0, 0.3])).tolist() == [1, 2]


def test_two_people_crossing_keep_their_ids() -> None:
    tracker = IoUTracker(TrackerConfig(nms_iou=None))
    first = None
    for k in range(40):
        t = k / 10
        boxes = np.array([_walk((0, 100), (60, 0), t), _walk((300, 112), (-60, 0), t)])
        ids = tracker.step(boxes[::-1] if k % 2 else boxes, t, np.full(2, 0.9))  # order must not matter
        ids = ids[::-1] if k % 2 else ids
        first = ids.copy() if first is None else first
        np.testing.assert_array_equal(ids, first)
    assert tracker.num_tracks == 2


def test_appearance_keeps_crossing_people_apart() -> None:
    """Two people who meet and turn back (a motion the constant-velocity model does not foresee): IoU alone
    swaps them, the colour appearance does not."""
    frame = np.zeros((300, 600, 3), np.uint8)
    results = {}
    for weight in (0.0, 0.7):
        tracker = IoUTracker(TrackerConfig(nms_iou=None, appearance_weight=weight))
        swaps = 0
        for k in range(30):
            t = k / 10
            xa = (
                150 + 10 * k if k <= 10 else 250 - 10 * (k - 10)
            )  # A walks right, meets B at x 250, turns back
            xb = 350 - 10 * k if k <= 10 else 250 + 10 * (k - 10)  # B walks left, turns back
            boxes = np.array([[xa, 100, 40, 100], [xb, 100, 40, 100]], float)
            frame[:] = 0
            frame[100:200, xa : xa + 40] = (0, 0, 200)  # A red
            frame[100:200, xb : xb + 40] = (200, 0, 0)  # B blue (drawn over A where they overlap)
            ids = tracker.step(boxes, t, np.full(2, 0.9), frame)
            if k == 0:
                start = ids.copy()
            elif k > 12:
                swaps += int((ids != start).any())
        results[weight] = swaps
    assert results[0.0] > 0 and results[0.7] == 0


def test_kalman_prediction_follows_a_fast_mover() -> None:
    # 25 px per frame with 40 px wide boxes: IoU with the last box is low, the prediction keeps it
    tracker = IoUTracker()
    ids = {
        int(tracker.step(np.array([_walk((0, 0), (250, 0), k / 10)]), k / 10, np.array([0.9]))[0])
        for k in range(30)
    }
    assert ids == {1}


def test_coasting_through_missed_frames_and_death() -> None:
    tracker = IoUTracker(TrackerConfig(max_age=3, coast_frames=2, coast_min_hits=2))
    box = lambda k: np.array([_walk((0, 0), (20, 0), k / 10)])  # noqa: E731
    high = np.array([0.9])
    assert tracker.step(box(0), 0.0, high)[0] == 1
    assert tracker.step(box(1), 0.1, high)[0] == 1
    tracker.step(np.zeros((0, 4)), 0.2)
    ids, boxes = tracker.coasting(0.2)
    assert ids.tolist() == [1] and abs(boxes[0, 0] - 4.0) < 2.0  # predicted forward (20 px/s)
    for k in (3, 4):
        tracker.step(np.zeros((0, 4)), k / 10)
    assert len(tracker.coasting(0.4)[0]) == 0  # unseen 3 > coast_frames 2
    assert tracker.step(box(5), 0.5, high)[0] == 1  # unseen for 3 frames: still alive
    for k in range(6, 10):
        tracker.step(np.zeros((0, 4)), k / 10)
    assert tracker.num_tracks == 0
    assert tracker.step(box(10), 1.0, high)[0] == -1  # a new, tentative identity


def test_state_is_bounded() -> None:
    tracker = IoUTracker(TrackerConfig(max_tracks=16, max_age=1000, coast_frames=3))
    rng = np.random.default_rng(0)
    for k in range(50):
        boxes = np.column_stack([rng.uniform(0, 5000, (10, 2)), np.full((10, 2), 20.0)])
        tracker.step(boxes, k * 0.1, np.full(10, 0.9))
        assert int(tracker._alive.sum()) <= 16
    assert tracker._x.shape == (16, 8)


def test_duplicates_are_suppressed() -> None:
    tracker = IoUTracker()
    boxes = np.array([[0, 0, 40, 100], [2, 1, 40, 100], [500, 0, 40, 100]], float)
    assert tracker.step(boxes, 0.0, np.array([0.9, 0.95, 0.9])).tolist() == [-1, 1, 2]


def test_reset_keeps_ids_increasing() -> None:
    tracker = IoUTracker()
    assert tracker.step(np.array([[0, 0, 40, 100]], float), 0.0, np.array([0.9])).tolist() == [1]
    tracker.reset()
    assert tracker.num_tracks == 0
    assert tracker.step(np.array([[0, 0, 40, 100]], float), 5.0, np.array([0.9])).tolist() == [2]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_iou": 1.5},
        {"max_tracks": 0},
        {"high_score": 0.9, "new_score": 0.8},
        {"appearance_momentum": 1.0},
        {"coast_frames": 20, "max_age": 15},
        {"confirm_hits": 0},
        {"low_score": "0.1"},
    ],
)
def test_config_is_validated(kwargs) -> None:
    with pytest.raises(InputError):
        TrackerConfig(**kwargs)


def test_a_bad_nms_iou_is_refused() -> None:
    for bad in (0.0, -0.1, 1.5, float("nan"), "0.5", True):
        with pytest.raises(InputError, match="nms_iou"):
            TrackerConfig(nms_iou=bad)  # type: ignore[arg-type]
    assert TrackerConfig(nms_iou=None).nms_iou is None and TrackerConfig(nms_iou=1).nms_iou == 1


@pytest.mark.data
def test_pets_raw_detections_get_stable_ids(shared_data: Path) -> None:
    """PETS09 S2L1's raw ACF detections (no ids, margin scores): CLEAR MOT against the ground truth."""
    from pairedge.measure.metrics.pairwise.boxes import FrameBoxes
    from pairedge.measure.metrics.tracking import read_tracks, score_tracks

    base = shared_data / "pets09_s2l1" / "mot15"
    det = np.loadtxt(base / "det" / "det.txt", delimiter=",")
    tracker = IoUTracker()
    pred = {}
    for frame in range(1, 796):
        d = det[det[:, 0] == frame]
        ids = tracker.step(d[:, 2:6], (frame - 1) / 7.0, d[:, 6])
        keep = ids >= 0
        pred[frame] = FrameBoxes(ids[keep], d[keep, 2:6])
    m = score_tracks(pred, read_tracks(base / "gt" / "gt.txt", truth=True))
    print(f"PETS det.txt: IDF1 {m['idf1']:.3f}, {m['id_switches']} switches, MOTA {m['mota']:.3f}")
    # the tracker before the ByteTrack redesign: IDF1 0.518, 53 switches (with coasting)
    assert m["idf1"] > 0.65 and m["id_switches"] < 45


# -- coasting: Coasting: the built-in tracker keeps a person through a short detection gap at the predicted
# box.


def _box(x: float, y: float = 50.0) -> list[float]:
    return [x, y, 40.0, 100.0]


def test_tracker_coasts_matched_tracks_only_within_the_gap() -> None:
    tracker = IoUTracker(TrackerConfig(coast_frames=2, coast_min_hits=3))
    for k in range(3):  # 3 hits at 100 px / s to the right
        assert tracker.step(np.array([_box(10 * k), _box(400)]), k / 10).tolist() == [1, 2]
    tracker.step(np.array([_box(400)]), 0.3)  # track 1 missed
    ids, boxes = tracker.coasting(0.3)
    assert ids.tolist() == [1]
    # the Kalman filter has learnt part of the 100 px / s after three boxes: ahead of x 20, short of 30
    assert 21 < boxes[0, 0] < 30 and np.allclose(boxes[0, 1:], _box(0)[1:], atol=1.0)
    tracker.step(np.array([_box(400)]), 0.4)
    assert tracker.coasting(0.4)[0].tolist() == [1]
    tracker.step(np.array([_box(400)]), 0.5)  # third missed frame > coast_frames: kept alive, not coasted
    assert tracker.coasting(0.5)[0].tolist() == []
    assert tracker.num_tracks == 2


def test_new_tracks_and_overlapping_predictions_do_not_coast() -> None:
    tracker = IoUTracker(TrackerConfig(coast_frames=3, coast_min_hits=2))
    tracker.step(np.array([_box(0)]), 0.0)
    tracker.step(np.zeros((0, 4)), 0.1)
    assert tracker.coasting(0.1)[0].tolist() == []  # one hit: could be a false detection
    tracker.step(np.array([_box(0)]), 0.2)
    tracker.step(np.zeros((0, 4)), 0.3)
    assert tracker.coasting(0.3)[0].tolist() == [1]
    # a detection on top of the prediction (taken by another track) leaves no second box on that person
    assert tracker.coasting(0.3, np.array([_box(2)]))[0].tolist() == []
    assert tracker.coasting(0.3, np.array([_box(300)]))[0].tolist() == [1]


def test_coasting_is_off_by_config_and_validated() -> None:
    tracker = IoUTracker(TrackerConfig(coast_frames=0))
    for k in range(4):
        tracker.step(np.array([_box(0)]), k / 10)
    tracker.step(np.zeros((0, 4)), 0.4)
    assert tracker.coasting(0.4)[0].tolist() == []
    with pytest.raises(InputError, match="coast_frames"):
        TrackerConfig(coast_frames=20, max_age=15)
    with pytest.raises(InputError, match="coast_min_hits"):
        TrackerConfig(coast_min_hits=0)


def _pipe(tmp_path: Path, **config: object) -> Pipeline:
    folder = tmp_path / "m"
    write_toy_model(folder / "stage1.onnx", stage=1, spec_name="pairedge", seed=1)
    write_toy_model(folder / "stage2.onnx", stage=2, spec_name="pairedge", seed=2)
    cfg = PipelineConfig(features={"motion": "boxes"}, **config)
    return Pipeline.load(folder, config=cfg)


def _frames() -> list[np.ndarray]:
    """Three people walking right; person 2 (x 300) is missed in frames 4 and 5; person 3 reaches the
    image's right edge (width 640) and is missed from frame 4 on: their prediction lies mostly outside."""
    out = []
    for k in range(8):
        rows = [_box(20 + 10 * k), _box(300 + 10 * k), _box(560 + 20 * k)]
        keep = [0] + ([1] if k not in (4, 5) else []) + ([2] if k < 4 else [])
        out.append(np.array([rows[i] for i in keep]))
    return out


def test_pipeline_keeps_a_missed_person_and_marks_them(tmp_path: Path) -> None:
    tracker = TrackerConfig(coast_frames=2, coast_min_hits=2)
    off = TrackerConfig(coast_frames=0)
    with _pipe(tmp_path, tracker_config=tracker) as pipe, _pipe(tmp_path, tracker_config=off) as plain:
        for k, boxes in enumerate(_frames()):
            dets = Detections.from_arrays(boxes, None, np.full(len(boxes), 0.9))
            r = pipe.step(None, dets, k / 10, image_size=(640, 480))
            base = plain.step(None, dets, k / 10, image_size=(640, 480))
            if k in (4, 5):
                assert r.track_ids.tolist() == [1, 2]  # person 3 walked out: not coasted
                assert r.coasted_mask.tolist() == [False, True]
                # the prediction lags a little (the velocity is learnt from 0 at birth)
                np.testing.assert_allclose(r.boxes[1], _box(300 + 10 * k), atol=10.0)
                assert len(r.pairs) == 1 and r.pairs.tolist() == [[1, 2]]
                assert len(base.track_ids) == 1 and not base.coasted_mask.any()
                tracks = json.loads(json.dumps(r.to_json_dict()))["tracks"]
                assert [t.get("coasted", False) for t in tracks] == r.coasted_mask.tolist()
            else:
                assert not r.coasted_mask.any()


def test_coasted_people_respect_max_people_and_get_unknown_orientation(tmp_path: Path) -> None:
    tracker = TrackerConfig(coast_frames=3, coast_min_hits=1, confirm_hits=1)  # a new person counts at once
    with _pipe(tmp_path, tracker_config=tracker, max_people=2) as pipe:
        two = np.array([_box(20), _box(300)])
        orient = np.array([0.5, 1.0], np.float32)
        pipe.step(None, Detections.from_arrays(two, None, None, orient), 0.0, image_size=(640, 480))
        r = pipe.step(
            None, Detections.from_arrays(two[:1], None, None, orient[:1]), 0.1, image_size=(640, 480)
        )
        assert r.coasted_mask.tolist() == [False, True]
        many = np.array([_box(20), _box(150)])
        r = pipe.step(None, Detections.from_arrays(many, None, None, orient), 0.2, image_size=(640, 480))
        assert len(r.track_ids) == 2 and not r.coasted_mask.any()  # full: nobody coasted in


def test_coasted_box_is_clipped_to_the_image(tmp_path: Path) -> None:
    tracker = TrackerConfig(coast_frames=2, coast_min_hits=2)
    with _pipe(tmp_path, tracker_config=tracker) as pipe:
        for k in range(6):  # walking right at 100 px / s, right edge at 590 px of a 640 px image
            boxes = np.array([_box(20), _box(500 + 10 * k)])
            pipe.step(None, Detections.from_arrays(boxes), k / 10, image_size=(640, 480))
        r = pipe.step(None, Detections.from_arrays(np.array([_box(20)])), 0.6, image_size=(640, 480))
        assert r.coasted_mask.tolist() == [False, True]
        x = r.boxes[1, 0]
        assert 550 < x < 560 and r.boxes[1, 2] == pytest.approx(40, abs=1)  # predicted on, still inside
        r = pipe.step(None, Detections.from_arrays(np.array([_box(20)])), 1.2, image_size=(640, 480))
        # 0.6 s later, further right: the box is cut at the image's right edge (640)
        assert r.boxes[1, 0] > x + 40 and r.boxes[1, 0] + r.boxes[1, 2] == pytest.approx(640, abs=1e-3)
        assert r.boxes[1, 2] < 40


def test_overlapping_people_stay_without_suppression_and_a_duplicate_goes_with_it() -> None:
    """A pairedge detector already suppressed duplicates (``nms_iou`` None keeps two overlapping people); a
    raw detection file keeps the default 0.35, which drops a detector's second box on one person."""
    both, raw = IoUTracker(TrackerConfig(nms_iou=None)), IoUTracker(TrackerConfig())
    for k in range(2):  # two people 30 px apart walk towards each other (IoU 0.14, 0.33)
        two = np.array([_box(100 + 5 * k), _box(130 - 5 * k)])
        assert both.step(two, k / 10).tolist() == raw.step(two, k / 10).tolist() == [1, 2]
    overlap = np.array([_box(110), _box(120)])  # IoU 0.6 > nms_iou 0.35
    scores = np.array([0.9, 0.8])
    assert both.step(overlap, 0.2, scores).tolist() == [1, 2]
    assert raw.step(overlap, 0.2, scores).tolist() == [1, -1]
    solo = IoUTracker(TrackerConfig())
    solo.step(np.array([_box(0)]), 0.0)
    assert solo.step(np.array([_box(0), _box(2)]), 0.1, np.array([0.9, 0.85])).tolist() == [1, -1]
    assert solo.num_tracks == 1
