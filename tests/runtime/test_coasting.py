"""Coasting: the built-in tracker keeps a person through a short detection gap at the predicted box."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.types import Detections
from pairedge.runtime import Pipeline, PipelineConfig
from pairedge.runtime.tracker import IoUTracker, TrackerConfig
from rt_onnx_models import write_toy_model


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
