"""Conversions between ROS 2 messages and pairedge's types (no ROS installation needed).

Images: ``sensor_msgs/Image`` in the common encodings (:data:`ENCODINGS`: BGR / RGB with or without alpha,
mono 8 / 16 bit, YUV 4:2:2, Bayer 8 / 16 bit) and ``sensor_msgs/CompressedImage`` (the formats of
:mod:`pairedge.core.io.imagesize`) -> (H, W, 3) uint8 BGR. Every size an image declares is checked before a
byte is converted: a compressed image's header against :data:`~pairedge.core.limits.MAX_FRAME_PIXELS` before
it is decoded, a raw image's width, height, step, encoding constraints (an even width for YUV 4:2:2, 2 x 2
pixels for a Bayer tile) and data length before any reshape. Detections: ``vision_msgs/Detection2DArray`` ->
:class:`~pairedge.core.types.Detections` (box centre and size -> ``x y w h``, the best hypothesis score, the
tracking id from ``Detection2D.id``); a box beyond the float32 range is dropped alone and counted.
Results: a :class:`~pairedge.runtime.types.FrameResult` -> ``std_msgs/String`` holding the runtime's JSON
record and a ``visualization_msgs/MarkerArray`` of pair links and group hulls in image pixels.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
from pairedge.core import limits
from pairedge.core.errors import InputError
from pairedge.core.io.imagesize import check_image_bytes
from pairedge.core.io.textio import FLOAT32_MAX, printable
from pairedge.core.types import Detections

_FLOATS = {"float32", "float64"}
_DTYPES = {
    "bool": np.bool_,
    "int8": np.int8,
    "uint8": np.uint8,
    "byte": np.uint8,
    "char": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}

#: encoding -> (channels, dtype, OpenCV conversion to BGR or None)
ENCODINGS: dict[str, tuple[int, type, int | None]] = {
    "bgr8": (3, np.uint8, None),
    "8UC3": (3, np.uint8, None),
    "rgb8": (3, np.uint8, cv2.COLOR_RGB2BGR),
    "bgra8": (4, np.uint8, cv2.COLOR_BGRA2BGR),
    "8UC4": (4, np.uint8, cv2.COLOR_BGRA2BGR),
    "rgba8": (4, np.uint8, cv2.COLOR_RGBA2BGR),
    "mono8": (1, np.uint8, cv2.COLOR_GRAY2BGR),
    "8UC1": (1, np.uint8, cv2.COLOR_GRAY2BGR),
    "mono16": (1, np.uint16, cv2.COLOR_GRAY2BGR),
    "16UC1": (1, np.uint16, cv2.COLOR_GRAY2BGR),
    "yuv422": (2, np.uint8, cv2.COLOR_YUV2BGR_UYVY),
    "uyvy": (2, np.uint8, cv2.COLOR_YUV2BGR_UYVY),
    "yuv422_yuy2": (2, np.uint8, cv2.COLOR_YUV2BGR_YUY2),
    "yuyv": (2, np.uint8, cv2.COLOR_YUV2BGR_YUY2),
    # Bayer mosaics, named as cv_bridge maps them (OpenCV names the pattern from the second row)
    "bayer_rggb8": (1, np.uint8, cv2.COLOR_BayerBG2BGR),
    "bayer_bggr8": (1, np.uint8, cv2.COLOR_BayerRG2BGR),
    "bayer_gbrg8": (1, np.uint8, cv2.COLOR_BayerGR2BGR),
    "bayer_grbg8": (1, np.uint8, cv2.COLOR_BayerGB2BGR),
    "bayer_rggb16": (1, np.uint16, cv2.COLOR_BayerBG2BGR),
    "bayer_bggr16": (1, np.uint16, cv2.COLOR_BayerRG2BGR),
    "bayer_gbrg16": (1, np.uint16, cv2.COLOR_BayerGR2BGR),
    "bayer_grbg16": (1, np.uint16, cv2.COLOR_BayerGB2BGR),
}
#: YUV 4:2:2 encodings: two pixels share one U and one V sample, so the width must be even.
EVEN_WIDTH = frozenset({"yuv422", "uyvy", "yuv422_yuy2", "yuyv"})
#: Bayer encodings: demosaicing needs at least one whole 2 x 2 tile.
BAYER = frozenset(name for name in ENCODINGS if name.startswith("bayer_"))
#: Drop reason of a detection box whose values (or their sums) leave the float32 range.
BOX_OUT_OF_RANGE = f"detection box beyond the float32 range (a value or x + w, y + h above {FLOAT32_MAX:.3g})"
#: Drop reason of a detection score beyond the float32 range.
SCORE_OUT_OF_RANGE = f"detection score beyond the float32 range (above {FLOAT32_MAX:.3g})"
OTHER_CLASS = "detection of another class"


def build(store: Any, typename: str, **values: Any) -> Any:
    """A message of ``typename`` with ``values`` and every other field at its ROS default (0, "", [])."""
    _, fields = store.fielddefs[typename]
    cls = store.types[typename]
    kwargs = {name: values[name] if name in values else _default(store, desc) for name, desc in fields}
    return cls(**kwargs)


def _default(store: Any, desc: tuple[Any, Any]) -> Any:
    kind, rest = desc
    name = getattr(kind, "name", str(kind))
    if name == "BASE":
        base = rest[0]
        return "" if base == "string" else (False if base == "bool" else (0.0 if base in _FLOATS else 0))
    if name == "NAME":
        return build(store, rest)
    sub, count = rest
    sub_kind = getattr(sub[0], "name", str(sub[0]))
    if sub_kind == "BASE" and sub[1][0] in _DTYPES:
        return np.zeros(count if name == "ARRAY" else 0, _DTYPES[sub[1][0]])
    return [_default(store, sub) for _ in range(count)] if name == "ARRAY" else []


def stamp_ns(header: Any) -> int:
    """A header's stamp in integer nanoseconds.

    Raises:
        InputError: a negative ``sec`` or a ``nanosec`` of 10^9 or more (not a valid
            ``builtin_interfaces/Time``).
    """
    sec, nanosec = int(header.stamp.sec), int(header.stamp.nanosec)
    if not 0 <= nanosec < 1_000_000_000:
        raise InputError(f"header stamp with nanosec {nanosec}; expected 0 <= nanosec < 10^9")
    return sec * 1_000_000_000 + nanosec


def image_to_bgr(msg: Any) -> np.ndarray:
    """A ``sensor_msgs/Image`` or ``CompressedImage`` as (H, W, 3) uint8 BGR.

    Raises:
        InputError: unknown encoding, a size above the frame ceilings (:mod:`pairedge.core.limits`), a width
            or height the encoding cannot have, a step or data buffer too short, bytes that do not decode.
    """
    if hasattr(msg, "format") and not hasattr(msg, "encoding"):
        return _decode_compressed(msg)
    encoding = str(msg.encoding)
    if encoding not in ENCODINGS:
        raise InputError(
            f"image encoding '{printable(encoding)}' is not supported; expected one of "
            f"{', '.join(ENCODINGS)} (or a sensor_msgs/CompressedImage)"
        )
    channels, dtype, conversion = ENCODINGS[encoding]
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    limits.check_frame_size(width, height, f"sensor_msgs/Image ({encoding})")
    if encoding in EVEN_WIDTH and width % 2:
        raise InputError(
            f"image {width} x {height} {encoding}: expected an even width (4:2:2 shares chroma "
            "between pixel pairs)"
        )
    if encoding in BAYER and (width < 2 or height < 2):
        raise InputError(
            f"image {width} x {height} {encoding}: expected at least 2 x 2 pixels (one Bayer tile)"
        )
    itemsize = np.dtype(dtype).itemsize
    row = width * channels * itemsize
    raw = np.frombuffer(memoryview(msg.data), np.uint8)
    if step < row or raw.size < step * (height - 1) + row:
        raise InputError(
            f"image {width} x {height} {encoding}: expected a step >= {row} bytes and "
            f"{step * height} bytes of data, got step {step} and {raw.size} bytes"
        )
    rows = np.lib.stride_tricks.as_strided(raw, (height, row), (step, 1))
    pixels = np.ascontiguousarray(rows).view(np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<"))
    pixels = pixels.reshape(height, width, channels) if channels > 1 else pixels.reshape(height, width)
    if dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8)
    if conversion is None:
        return pixels
    return cv2.cvtColor(np.ascontiguousarray(pixels), conversion)


def _decode_compressed(msg: Any) -> np.ndarray:
    """A ``CompressedImage`` decoded, its declared size checked first (a 100 kB PNG can declare 400 MP)."""
    data = np.frombuffer(memoryview(msg.data), np.uint8)
    check_image_bytes(memoryview(data), "sensor_msgs/CompressedImage")
    image = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if image is None:
        raise InputError(
            f"compressed image ('{printable(msg.format)}'): the bytes do not decode although the header is "
            "valid"
        )
    return image


def bgr_to_image(store: Any, image: np.ndarray, stamp: int, frame_id: str = "camera") -> Any:
    """A ``sensor_msgs/Image`` (bgr8) of an (H, W, 3) uint8 BGR array."""
    h, w = image.shape[:2]
    return build(
        store,
        "sensor_msgs/msg/Image",
        header=header(store, stamp, frame_id),
        height=h,
        width=w,
        encoding="bgr8",
        is_bigendian=0,
        step=w * 3,
        data=np.ascontiguousarray(image).reshape(-1),
    )


def header(store: Any, stamp: int, frame_id: str) -> Any:
    """A ``std_msgs/Header`` at ``stamp`` nanoseconds."""
    time = build(
        store, "builtin_interfaces/msg/Time", sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000
    )
    return build(store, "std_msgs/msg/Header", stamp=time, frame_id=frame_id)


class TrackIds:
    """Track ids from ``Detection2D.id`` strings: integers as written, other strings numbered in order seen.

    An empty id means the detector gave no identity (-1: the runtime's tracker assigns one). The name table
    keeps the ``capacity`` most recently seen names, so a node that runs for weeks stays bounded; a name
    unseen for that long gets a new number (a new track) when it comes back.
    """

    def __init__(self, capacity: int = 65_536) -> None:
        self._names: OrderedDict[str, int] = OrderedDict()
        self._next = 2**40  # far from any detector's integer ids
        self.capacity = capacity

    def __call__(self, text: str) -> int:
        text = text.strip()
        if not text:
            return -1
        if text.lstrip("-").isdigit() and len(text) < 19:
            return int(text)
        if len(text) > 256:  # the table keeps names: a long one is kept as its digest
            text = "sha256:" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
        if text in self._names:
            self._names.move_to_end(text)
            return self._names[text]
        self._names[text] = self._next
        self._next += 1
        if len(self._names) > self.capacity:
            self._names.popitem(last=False)
        return self._names[text]


def detections_from_msg(
    msg: Any, ids: TrackIds, classes: frozenset[str] | None = None
) -> tuple[Detections, Counter[str]]:
    """The boxes of a ``vision_msgs/Detection2DArray``.

    Args:
        msg: the message (vision_msgs 4.x layout, or the older ``geometry_msgs/Pose2D`` centre).
        ids: the run's id mapping.
        classes: keep only detections whose best hypothesis has one of these class ids (None: all).

    Returns:
        The detections (NaN / inf boxes kept: the runtime drops and counts them) and the detections left
        out, by reason (another class, a box or score beyond the float32 range).
    """
    boxes, tids, scores = [], [], []
    skipped: Counter[str] = Counter()
    for det in msg.detections:
        best_class, best_score = "", 1.0
        if len(det.results):
            hyp = max(det.results, key=lambda r: _hypothesis(r)[1])
            best_class, best_score = _hypothesis(hyp)
        if classes is not None and best_class not in classes:
            skipped[OTHER_CLASS] += 1
            continue
        box = _box(det.bbox)
        if box is None:
            skipped[BOX_OUT_OF_RANGE] += 1
            continue
        if math.isfinite(best_score) and abs(best_score) > FLOAT32_MAX:
            skipped[SCORE_OUT_OF_RANGE] += 1
            continue
        boxes.append(box)
        tids.append(ids(str(det.id)))
        scores.append(best_score)
    return Detections.from_arrays(
        np.asarray(boxes, np.float64), np.asarray(tids), np.asarray(scores)
    ), skipped


def _box(bbox: Any) -> tuple[float, float, float, float] | None:
    """``(x, y, w, h)`` of a ``BoundingBox2D``; None when finite values leave the float32 range.

    NaN / inf values pass through (the runtime drops such a box with its own reason); a finite value that
    float32 cannot hold, or a corner ``x + w`` / ``y + h`` that overflows it, would become inf silently.
    """
    centre = bbox.center
    point = getattr(centre, "position", centre)  # vision_msgs 4.x: Pose2D.position; older: Pose2D.x
    cx, cy, w, h = float(point.x), float(point.y), float(bbox.size_x), float(bbox.size_y)
    if not all(math.isfinite(v) for v in (cx, cy, w, h)):
        return cx - w / 2, cy - h / 2, w, h
    x, y = cx - w / 2, cy - h / 2
    if any(not math.isfinite(v) or abs(v) > FLOAT32_MAX for v in (x, y, w, h, x + w, y + h)):
        return None
    return x, y, w, h


def _hypothesis(result: Any) -> tuple[str, float]:
    hyp = getattr(result, "hypothesis", result)  # vision_msgs 4.x nests it; 2.x/3.x has id/score flat
    name = getattr(hyp, "class_id", getattr(hyp, "id", ""))
    return str(name), float(hyp.score)


def detections_to_msg(
    store: Any, dets: Detections, stamp: int, frame_id: str = "camera", class_id: str = "person"
) -> Any:
    """A ``vision_msgs/Detection2DArray`` of ``dets`` (ids -1 are written as empty ``id`` strings)."""
    hdr = header(store, stamp, frame_id)
    items = []
    for (x, y, w, h), tid, score in zip(
        dets.boxes.tolist(), dets.track_ids.tolist(), dets.scores.tolist(), strict=True
    ):
        point = build(store, "vision_msgs/msg/Point2D", x=x + w / 2, y=y + h / 2)
        bbox = build(
            store,
            "vision_msgs/msg/BoundingBox2D",
            size_x=w,
            size_y=h,
            center=build(store, "vision_msgs/msg/Pose2D", position=point),
        )
        hyp = build(store, "vision_msgs/msg/ObjectHypothesis", class_id=class_id, score=score)
        result = build(store, "vision_msgs/msg/ObjectHypothesisWithPose", hypothesis=hyp)
        items.append(
            build(
                store,
                "vision_msgs/msg/Detection2D",
                header=hdr,
                results=[result],
                bbox=bbox,
                id="" if tid < 0 else str(tid),
            )
        )
    return build(store, "vision_msgs/msg/Detection2DArray", header=hdr, detections=items)


def result_to_string(store: Any, record: dict[str, Any]) -> Any:
    """A ``std_msgs/String`` holding one JSON record (the ``results.jsonl`` schema)."""
    return build(
        store, "std_msgs/msg/String", data=json.dumps(record, separators=(",", ":"), allow_nan=False)
    )


def result_to_markers(
    store: Any, result: Any, stamp: int, frame_id: str, colours: Sequence[tuple[int, int, int]]
) -> Any:
    """A ``visualization_msgs/MarkerArray`` drawing a frame's result in image pixels (z = 0).

    A DELETEALL marker first (so links of the previous frame vanish), then one LINE_LIST of the interacting
    pairs' box-centre links coloured by label (``colours``: BGR per label id, as in the annotated video),
    then one closed LINE_STRIP per group around its members' boxes.
    """
    hdr = header(store, stamp, frame_id)
    centres = {
        int(t): (float(x + w / 2), float(y + h / 2))
        for t, (x, y, w, h) in zip(result.track_ids.tolist(), result.boxes.tolist(), strict=True)
    }
    markers = [build(store, "visualization_msgs/msg/Marker", header=hdr, ns="pairedge", id=0, action=3)]
    points, cols = [], []
    for (a, b), label in zip(
        result.pairs[result.interacting].tolist(), result.label_ids[result.interacting].tolist(), strict=True
    ):
        colour = _rgba(store, colours[int(label) % len(colours)])
        for tid in (a, b):
            points.append(build(store, "geometry_msgs/msg/Point", x=centres[tid][0], y=centres[tid][1]))
            cols.append(colour)
    if points:
        markers.append(_marker(store, hdr, "pairedge/pairs", 1, 5, points, cols))
    boxes = {int(t): b for t, b in zip(result.track_ids.tolist(), result.boxes.tolist(), strict=True)}
    for k, group in enumerate(result.groups):
        corners = np.array([c for m in group.members for c in _corners(boxes[int(m)])], np.float32)
        hull = cv2.convexHull(corners).reshape(-1, 2)
        ring = [build(store, "geometry_msgs/msg/Point", x=float(x), y=float(y)) for x, y in hull]
        colour = _rgba(
            store, colours[group.activity_id % len(colours)] if group.activity_id >= 0 else (200,) * 3
        )
        markers.append(
            _marker(store, hdr, "pairedge/groups", 2 + k, 4, [*ring, ring[0]], [colour] * (len(ring) + 1))
        )
    return build(store, "visualization_msgs/msg/MarkerArray", markers=markers)


def _marker(store: Any, hdr: Any, ns: str, mid: int, kind: int, points: list[Any], colours: list[Any]) -> Any:
    scale = build(store, "geometry_msgs/msg/Vector3", x=2.0)  # line width in pixels
    orientation = build(store, "geometry_msgs/msg/Quaternion", w=1.0)
    pose = build(store, "geometry_msgs/msg/Pose", orientation=orientation)
    return build(
        store,
        "visualization_msgs/msg/Marker",
        header=hdr,
        ns=ns,
        id=mid,
        type=kind,
        action=0,
        pose=pose,
        scale=scale,
        color=colours[0],
        points=points,
        colors=colours,
    )


def _rgba(store: Any, bgr: tuple[int, int, int]) -> Any:
    b, g, r = bgr
    return build(store, "std_msgs/msg/ColorRGBA", r=r / 255.0, g=g / 255.0, b=b / 255.0, a=1.0)


def _corners(box: Sequence[float]) -> list[tuple[float, float]]:
    x, y, w, h = box
    return [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
