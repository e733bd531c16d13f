"""Input sanitising: malformed frames and detections are dropped and reported, never raised (SPEC section
9)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pairedge.core.types import Detections
from pairedge.runtime.config import ValidationConfig
from pairedge.runtime.validate import validate_detections, validate_frame

CFG = ValidationConfig()


def test_frames() -> None:
    gray = np.zeros((48, 64), np.uint8)
    assert validate_frame(gray, CFG)[1] is None
    image, reason = validate_frame(np.zeros((48, 64, 1), np.uint8), CFG)
    assert reason is None and image is not None and image.shape == (48, 64)
    assert validate_frame(np.zeros((48, 64, 3), np.uint8), CFG)[1] is None
    for bad, match in [
        (None, "no frame"),
        ("frame.png", "numpy image"),
        (np.zeros((48, 64, 3), np.float32), "uint8"),
        (np.zeros((48, 64, 4), np.uint8), "shape"),
        (np.zeros((2, 48, 64, 3), np.uint8), "shape"),
        (np.zeros((4, 64), np.uint8), "at least"),
        (np.zeros((0, 0, 3), np.uint8), "at least"),
    ]:
        image, reason = validate_frame(bad, CFG)
        assert image is None and reason is not None and match in reason


def test_each_kind_of_bad_detection_is_dropped_and_counted() -> None:
    boxes = [
        [10, 10, 20, 40],  # ok
        [np.nan, 10, 20, 40],  # non-finite
        [10, 10, np.inf, 40],  # non-finite
        [10, 10, -5, 40],  # negative width
        [10, 10, 0, 40],  # empty
        [10, 10, 5000, 40],  # huge
        [-100, 10, 50, 40],  # left of the image
        [700, 10, 50, 40],  # right of the image
        [30, 10, 20, 40],  # duplicate id of row 0
        [50, 10, 20, 40],  # invalid id
        [-10, -10, 20, 40],  # partly outside: kept
    ]
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 1, -7, 9]
    scores = [1.0] * 10 + [0.5]
    det = Detections.from_arrays(np.array(boxes, np.float32), np.array(ids), np.array(scores))
    clean, dropped = validate_detections(det, (640, 480), CFG)
    assert clean.track_ids.tolist() == [1, 9]
    assert dropped == {
        "non-finite box or score": 2,
        "box smaller than min_box_side": 2,
        "huge box": 1,
        "box outside the image": 2,
        "invalid track id": 1,
        "duplicate track id": 1,
    }


def test_missing_ids_are_kept_and_not_duplicates() -> None:
    det = Detections.from_arrays(np.array([[0, 0, 10, 10], [5, 5, 10, 10]], np.float32))
    clean, dropped = validate_detections(det, (100, 100), CFG)
    assert len(clean) == 2 and not dropped and (clean.track_ids == -1).all()


def test_unusable_detection_objects_are_dropped_whole() -> None:
    for bad in [
        "boxes",
        SimpleNamespace(boxes=np.zeros((3, 3)), track_ids=np.zeros(3), scores=np.zeros(3)),
        SimpleNamespace(boxes=np.zeros((3, 4)), track_ids=np.zeros(2), scores=np.zeros(3)),
        SimpleNamespace(boxes=[["a", "b", "c", "d"]], track_ids=[1], scores=[1]),
    ]:
        clean, dropped = validate_detections(bad, (100, 100), CFG)
        assert len(clean) == 0 and len(dropped) == 1
    clean, dropped = validate_detections(None, (100, 100), CFG)
    assert len(clean) == 0 and not dropped


def test_duck_typed_detections_and_no_image_size() -> None:
    duck = SimpleNamespace(boxes=[[5000.0, 0, 10, 10]], track_ids=[3], scores=[0.9])
    clean, dropped = validate_detections(duck, None, CFG)  # no image: no bounds checks
    assert clean.track_ids.tolist() == [3] and clean.boxes.dtype == np.float32


floats = st.floats(allow_nan=True, allow_infinity=True, width=32)


@settings(max_examples=150, deadline=None)
@given(
    arrays(np.float32, st.tuples(st.integers(0, 12), st.just(4)), elements=floats),
    st.lists(st.integers(-3, 6), min_size=12, max_size=12),
)
def test_fuzz_never_raises_and_kept_rows_are_sane(boxes: np.ndarray, ids: list[int]) -> None:
    n = len(boxes)
    det = Detections(boxes, np.array(ids[:n], np.int64), np.ones(n, np.float32))
    clean, dropped = validate_detections(det, (64, 48), CFG)
    assert len(clean) + sum(dropped.values()) == n
    b = clean.boxes.astype(np.float64)
    assert np.isfinite(b).all()
    assert ((b[:, 2] >= 1) & (b[:, 3] >= 1) & (b[:, 0] < 64) & (b[:, 1] < 48)).all()
    assert ((b[:, 0] + b[:, 2] > 0) & (b[:, 1] + b[:, 3] > 0)).all()
    real = clean.track_ids[clean.track_ids >= 0]
    assert len(np.unique(real)) == len(real) and (clean.track_ids >= -1).all()
