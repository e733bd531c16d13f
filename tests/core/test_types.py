"""Detections.from_ultralytics / from_supervision / from_jetson_inference on stand-in objects (no library is
imported)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from pairedge.core.errors import InputError
from pairedge.core.types import Detections

XYXY = np.array([[10, 20, 50, 120], [100, 30, 130, 90], [200, 0, 260, 40]], np.float32)


class FakeTensor:
    """A torch-like tensor: only ``.cpu().numpy()``."""

    def __init__(self, value: np.ndarray) -> None:
        self._value = value

    def cpu(self) -> FakeTensor:
        return self

    def numpy(self) -> np.ndarray:
        return self._value


def test_from_ultralytics_tensors_tracking() -> None:
    boxes = SimpleNamespace(
        xyxy=FakeTensor(XYXY),
        conf=FakeTensor(np.array([0.9, 0.8, 0.7])),
        cls=FakeTensor(np.array([0.0, 2.0, 0.0])),
        id=FakeTensor(np.array([5.0, 6.0, 7.0])),
    )
    d = Detections.from_ultralytics(SimpleNamespace(boxes=boxes))
    np.testing.assert_allclose(d.boxes, [[10, 20, 40, 100], [200, 0, 60, 40]])
    assert d.track_ids.tolist() == [5, 7]
    np.testing.assert_allclose(d.scores, [0.9, 0.7])


def test_from_ultralytics_numpy_no_ids_every_class() -> None:
    boxes = SimpleNamespace(xyxy=XYXY, conf=np.array([0.9, 0.8, 0.7]), cls=np.array([0, 2, 0]), id=None)
    d = Detections.from_ultralytics(SimpleNamespace(boxes=boxes), person_class=None)
    assert len(d) == 3 and (d.track_ids == -1).all()


def test_from_supervision() -> None:
    sv = SimpleNamespace(
        xyxy=XYXY, confidence=None, class_id=np.array([1, 0, 0]), tracker_id=np.array([3, 4, 9])
    )
    d = Detections.from_supervision(sv)
    assert d.track_ids.tolist() == [4, 9] and (d.scores == 1).all()
    np.testing.assert_allclose(d.boxes[0], [100, 30, 30, 60])
    empty = SimpleNamespace(xyxy=np.zeros((0, 4)), confidence=None, class_id=None, tracker_id=None)
    assert len(Detections.from_supervision(empty)) == 0


def test_adapters_refuse_other_objects() -> None:
    with pytest.raises(InputError, match="boxes.xyxy"):
        Detections.from_ultralytics(object())
    with pytest.raises(InputError, match=".xyxy"):
        Detections.from_supervision({"xyxy": XYXY})
    with pytest.raises(InputError, match="expected 3 scores"):
        Detections.from_supervision(
            SimpleNamespace(xyxy=XYXY, confidence=np.ones(2), class_id=None, tracker_id=None)
        )


def _det(left, top, right, bottom, conf, cls_id, **track):
    """A stand-in of jetson-inference's ``detectNet.Detection`` (attribute names as in its Python
    bindings)."""
    return SimpleNamespace(
        Left=left,
        Top=top,
        Right=right,
        Bottom=bottom,
        Width=right - left,
        Height=bottom - top,
        Confidence=conf,
        ClassID=cls_id,
        **track,
    )


def test_from_jetson_inference_untracked_and_tracked() -> None:
    plain = [_det(10, 20, 50, 120, 0.9, 1), _det(100, 30, 130, 90, 0.8, 3), _det(200, 0, 260, 40, 0.7, 1)]
    d = Detections.from_jetson_inference(plain)  # COCO-91 person = 1; class 3 (car) left out
    np.testing.assert_allclose(d.boxes, [[10, 20, 40, 100], [200, 0, 60, 40]])
    np.testing.assert_allclose(d.scores, [0.9, 0.7])
    assert (d.track_ids == -1).all()
    tracked = [
        _det(10, 20, 50, 120, 0.9, 0, TrackID=4, TrackStatus=1),
        _det(60, 20, 90, 120, 0.6, 0, TrackID=5, TrackStatus=0),
        _det(300, 20, 340, 120, 0.5, 0, TrackID=2, TrackStatus=-1),
    ]
    t = Detections.from_jetson_inference(
        tracked, person_class=0
    )  # PeopleNet: person = 0; dropped track left out
    assert t.track_ids.tolist() == [4, 5]
    assert len(Detections.from_jetson_inference([])) == 0
    assert len(Detections.from_jetson_inference(plain, person_class=None)) == 3


def test_from_jetson_inference_refuses_other_items() -> None:
    with pytest.raises(InputError, match="item 1 .* not a detectNet.Detection"):
        Detections.from_jetson_inference([_det(0, 0, 1, 1, 0.5, 1), SimpleNamespace(Left=0)])
