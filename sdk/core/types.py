"""Core value objects. Arrays inside; shapes and dtypes in the docstrings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.errors import InputError


@dataclass(frozen=True)
class Detections:
    """The detections of one frame.

    Attributes:
        boxes: (N, 4) float32, ``x y w h`` in pixels, top-left origin.
        track_ids: (N,) int64; -1 where the detector gave no identity.
        scores: (N,) float32 detector confidence (1.0 for ground truth).
        orientation: optional (N,) float32 body orientation, radians in the image plane (0 = facing image
            right, pi/2 = facing the camera, see :mod:`pairedge.core.features.orientation`), NaN where
            unknown; None when nobody has one.
        orientation_conf: optional (N,) float32 confidence in [0, 1] of each orientation (0 = unknown).
    """

    boxes: np.ndarray
    track_ids: np.ndarray
    scores: np.ndarray
    orientation: np.ndarray | None = None
    orientation_conf: np.ndarray | None = None

    @classmethod
    def from_arrays(
        cls,
        boxes: np.ndarray,
        track_ids: np.ndarray | None = None,
        scores: np.ndarray | None = None,
        orientation: np.ndarray | None = None,
        orientation_conf: np.ndarray | None = None,
    ) -> Detections:
        """Build with dtype conversion and shape checks; ids default to -1 and scores to 1.

        ``orientation`` (radians, NaN = unknown) and ``orientation_conf`` are optional (see
        :func:`check_orientation`); a confidence without orientations is an error. Complex values, boxes or
        scores beyond the float32 range and ids that are not whole numbers in the int64 range raise
        InputError (instead of a silent truncation or overflow); NaN / inf boxes pass (the runtime drops
        them)."""
        _check_real(boxes, track_ids, scores)
        b = (
            np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
            if np.size(boxes)
            else np.zeros((0, 4), np.float32)
        )
        n = len(b)
        ids = (
            np.full(n, -1, np.int64)
            if track_ids is None
            else np.asarray(track_ids, dtype=np.int64).reshape(-1)
        )
        sc = np.ones(n, np.float32) if scores is None else np.asarray(scores, dtype=np.float32).reshape(-1)
        if len(ids) != n or len(sc) != n:
            raise InputError(
                f"detections: expected {n} track ids and scores for {n} boxes, got {len(ids)} and {len(sc)}"
            )
        ori, conf = check_orientation(n, orientation, orientation_conf)
        return cls(b, ids, sc, ori, conf)

    @classmethod
    def from_ultralytics(cls, result: Any, person_class: int | None = 0) -> Detections:
        """The detections of one Ultralytics ``Results`` (duck-typed: ``ultralytics`` is never imported).

        Reads ``result.boxes.xyxy`` (N, 4), ``.conf`` (N,), ``.cls`` (N,) and ``.id`` (N,) when tracking (None
        otherwise: ids -1); each may be a numpy array or a tensor with ``.cpu().numpy()`` / ``.numpy()``.
        Keeps class ``person_class`` (COCO's person = 0; None keeps every class).

        Raises:
            InputError: ``result`` has no ``boxes.xyxy`` / ``.conf`` / ``.cls``.
        """
        boxes = getattr(result, "boxes", None)
        if boxes is None or not all(hasattr(boxes, k) for k in ("xyxy", "conf", "cls")):
            raise InputError(
                f"from_ultralytics: expected an Ultralytics Results with boxes.xyxy, .conf and .cls, got "
                f"{type(result).__name__}"
            )
        ids = getattr(boxes, "id", None)
        return _from_xyxy(
            _array(boxes.xyxy),
            _array(boxes.conf),
            _array(boxes.cls),
            None if ids is None else _array(ids),
            person_class,
            "from_ultralytics",
        )

    @classmethod
    def from_supervision(cls, detections: Any, person_class: int | None = 0) -> Detections:
        """The detections of a ``supervision.Detections`` (duck-typed: ``supervision`` is never imported).

        Reads ``.xyxy`` (N, 4), ``.confidence`` (N,) or None (scores 1), ``.class_id`` (N,) or None (every box
        kept) and ``.tracker_id`` (N,) or None (ids -1). Keeps class ``person_class`` (None: every class).

        Raises:
            InputError: no ``.xyxy``.
        """
        if not hasattr(detections, "xyxy"):
            raise InputError(
                "from_supervision: expected a supervision.Detections with .xyxy, got "
                f"{type(detections).__name__}"
            )
        xyxy = _array(detections.xyxy)
        conf, cls_id, ids = (getattr(detections, k, None) for k in ("confidence", "class_id", "tracker_id"))
        return _from_xyxy(
            xyxy,
            None if conf is None else _array(conf),
            None if cls_id is None else _array(cls_id),
            None if ids is None else _array(ids),
            person_class,
            "from_supervision",
        )

    @classmethod
    def from_jetson_inference(cls, detections: Any, person_class: int | None = 1) -> Detections:
        """The detections ``detectNet.Detect(image)`` returns on a Jetson (jetson-inference; duck-typed, never
        imported): a sequence of objects with ``Left, Top, Right, Bottom`` (pixels), ``Confidence``,
        ``ClassID`` and, with ``SetTrackingEnabled(True)``, ``TrackID`` (-1: untracked) and ``TrackStatus``
        (-1: dropped).

        Keeps class ``person_class``: 1 is "person" in the 91 COCO labels of jetson-inference's SSD models
        (``ssd-mobilenet-v2``, its default); PeopleNet's person is 0; None keeps every class. Dropped tracks'
        boxes (``TrackStatus`` -1) are left out.

        Raises:
            InputError: an item without the box / confidence / class attributes.
        """
        rows = []
        for k, d in enumerate(detections):
            try:
                box = [float(d.Left), float(d.Top), float(d.Right), float(d.Bottom)]
                conf, cls_id = float(d.Confidence), int(d.ClassID)
            except (AttributeError, TypeError, ValueError):
                raise InputError(
                    f"from_jetson_inference: item {k} ({type(d).__name__}) is not a detectNet.Detection: "
                    "expected Left, Top, Right, Bottom, Confidence and ClassID"
                ) from None
            if int(getattr(d, "TrackStatus", 0)) < 0:
                continue
            rows.append((*box, conf, cls_id, int(getattr(d, "TrackID", -1))))
        table = np.array(rows, np.float64).reshape(-1, 7)
        return _from_xyxy(
            table[:, :4],
            table[:, 4],
            table[:, 5],
            table[:, 6].astype(np.int64),
            person_class,
            "from_jetson_inference",
        )

    @classmethod
    def empty(cls) -> Detections:
        return cls.from_arrays(np.zeros((0, 4), np.float32))

    def __len__(self) -> int:
        return len(self.boxes)

    def subset(self, keep: np.ndarray) -> Detections:
        """Rows selected by a boolean mask or index array."""
        if self.orientation is None:
            return Detections(self.boxes[keep], self.track_ids[keep], self.scores[keep])
        conf = self.orientation_conf
        return Detections(
            self.boxes[keep],
            self.track_ids[keep],
            self.scores[keep],
            self.orientation[keep],
            None if conf is None else conf[keep],
        )


def _array(value: Any) -> np.ndarray:
    """A numpy view of an array or tensor (``.cpu().numpy()``, ``.numpy()``, or anything ``np.asarray``
    takes)."""
    if hasattr(value, "cpu") and callable(value.cpu):
        value = value.cpu()
    if hasattr(value, "numpy") and callable(value.numpy):
        value = value.numpy()
    return np.asarray(value)


def _from_xyxy(
    xyxy: np.ndarray,
    scores: np.ndarray | None,
    classes: np.ndarray | None,
    ids: np.ndarray | None,
    person_class: int | None,
    who: str,
) -> Detections:
    """Detections from ``x1 y1 x2 y2`` (N, 4), keeping ``person_class`` rows when ``classes`` is given."""
    b = _floats(xyxy, "xyxy").reshape(-1, 4) if np.size(xyxy) else np.zeros((0, 4))
    n = len(b)
    for name, value in (("scores", scores), ("class ids", classes), ("track ids", ids)):
        if value is not None and np.size(value) != n:
            raise InputError(f"{who}: expected {n} {name} for {n} boxes, got {np.size(value)}")
    keep = np.ones(n, bool)
    if classes is not None and person_class is not None:
        keep = _floats(classes, "class ids").reshape(-1) == person_class
    xywh = np.concatenate([b[:, :2], b[:, 2:] - b[:, :2]], axis=1)[keep]
    return Detections.from_arrays(
        xywh,
        None if ids is None else np.asarray(ids).reshape(-1)[keep],
        None if scores is None else np.asarray(scores).reshape(-1)[keep],
    )


def _check_real(boxes: Any, track_ids: Any, scores: Any) -> None:
    """Raise InputError for complex values, float32 overflow of boxes / scores, or unusable ids."""
    for name, value in (("boxes", boxes), ("track_ids", track_ids), ("scores", scores)):
        if value is not None and np.iscomplexobj(value):
            raise InputError(f"detections: expected real {name}, got complex values")
    for name, value in (("boxes", boxes), ("scores", scores)):
        v = _floats(value if value is not None else 0.0, name)
        if (np.abs(v[np.isfinite(v)]) > np.finfo(np.float32).max).any():
            raise InputError(f"detections: {name} beyond the float32 range (|x| > 3.4e38)")
    ids = np.asarray(track_ids if track_ids is not None else 0)
    if ids.dtype.kind == "O":  # e.g. Python ints beyond int64: compare as floats
        ids = _floats(track_ids, "track_ids")
    if ids.dtype.kind == "f":
        ok = np.isfinite(ids) & (ids == np.round(ids)) & (np.abs(ids) < 2.0**63)
        if not ok.all():
            raise InputError("detections: expected whole-number track ids in the int64 range (-1 = none)")


def _floats(value: Any, name: str) -> np.ndarray:
    """``value`` as float64, or InputError (text, None inside, objects) instead of ValueError / TypeError."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"detections: {name} must be numbers, got {type(value).__name__}") from None


def _n_floats(value: Any, n: int, name: str, plural: str) -> np.ndarray:
    """``value`` as (n,) float64 (:func:`_floats`), or InputError naming ``name`` / the wrong length."""
    values = _floats(value, name).reshape(-1)
    if len(values) != n:
        raise InputError(f"detections: expected {n} {plural} for {n} boxes, got {len(values)}")
    return values


#: Largest accepted |orientation| in radians; larger values are most likely degrees.
ORIENTATION_LIMIT = 2 * np.pi


def check_orientation(
    n: int, orientation: object, confidence: object = None
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Validate optional per-detection orientations for ``n`` boxes.

    Returns:
        ``(angles (n,) float32 wrapped to [-pi, pi), NaN = unknown; confidences (n,) float32 in [0, 1],
        0 where unknown)``, or ``(None, None)`` when ``orientation`` is None.

    Raises:
        InputError: not numbers, the wrong length, a finite angle beyond +-2 pi (degrees?), +-inf, or a
            confidence that is NaN or outside [0, 1].
    """
    if orientation is None:
        if confidence is not None:
            raise InputError("detections: orientation_conf given without orientation; give both or neither")
        return None, None
    raw = _n_floats(orientation, n, "orientation (radians, NaN = unknown)", "orientations")
    if np.isinf(raw).any() or (np.abs(raw[np.isfinite(raw)]) > ORIENTATION_LIMIT).any():
        bad = raw[np.isinf(raw) | (np.abs(np.nan_to_num(raw)) > ORIENTATION_LIMIT)][0]
        raise InputError(
            f"detections: orientation must be radians within +-2 pi (NaN = unknown), got {bad:g}; "
            "degrees? convert with numpy.radians"
        )
    known = np.isfinite(raw)
    if confidence is None:
        conf = known.astype(np.float32)
    else:
        conf64 = _n_floats(confidence, n, "orientation_conf (in [0, 1])", "orientation confidences")
        outside = ~(np.isfinite(conf64) & (conf64 >= 0) & (conf64 <= 1))
        if outside.any():
            raise InputError(
                f"detections: expected orientation confidences in [0, 1], got {conf64[outside][0]:g} "
                f"({int(outside.sum())} of {n} outside)"
            )
        conf = np.where(known, conf64, 0.0).astype(np.float32)
    angle = np.where(known, (np.nan_to_num(raw) + np.pi) % (2 * np.pi) - np.pi, np.nan)
    return angle.astype(np.float32), conf
