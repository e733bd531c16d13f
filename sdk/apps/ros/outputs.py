"""The live node's output messages, built directly as rclpy messages (no CDR round trip).

The bag path builds rosbags messages (:mod:`pairedge.core.io.ros.messages`); rclpy has its own generated
classes, which check every field's type when it is set (a float64 field takes a ``float``, never an
``int``; a ``byte`` field takes ``bytes`` of length 1). This module builds those directly from a frame's
result: the earlier node built rosbags messages, serialised them to CDR and deserialised the bytes into
rclpy messages, twice per frame. The marker geometry is :func:`marker_specs` (plain data), so the two
message builders draw the same thing; ``tests/apps/ros/test_outputs.py`` compares them field by
field.

Outputs of one frame (all stamped with the image's header stamp and frame):

- ``std_msgs/String``: the JSON record (``results.jsonl`` schema, plus ``stamp_ns``).
- ``visualization_msgs/MarkerArray``: DELETEALL, a LINE_LIST of interacting pairs, a LINE_STRIP per group.
- ``vision_msgs/Detection2DArray``, the pairs encoding (:func:`pairs_msg`, documented in ``docs/ros2.md``).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

#: Class id of the hypothesis that carries a pair's stage-1 probability in :func:`pairs_msg`.
P_INTERACT_CLASS = "interacting"
#: Marker types and actions (visualization_msgs/Marker constants).
LINE_STRIP, LINE_LIST, ADD, DELETEALL = 4, 5, 0, 3
#: diagnostic_msgs/DiagnosticStatus levels.
OK, WARN, ERROR = 0, 1, 2

#: Field of :class:`MessageTypes` -> "package/Type".
MESSAGE_TYPES: Mapping[str, str] = {
    "String": "std_msgs/String",
    "Header": "std_msgs/Header",
    "ColorRGBA": "std_msgs/ColorRGBA",
    "Time": "builtin_interfaces/Time",
    "Point": "geometry_msgs/Point",
    "Pose": "geometry_msgs/Pose",
    "Quaternion": "geometry_msgs/Quaternion",
    "Vector3": "geometry_msgs/Vector3",
    "Marker": "visualization_msgs/Marker",
    "MarkerArray": "visualization_msgs/MarkerArray",
    "Detection2DArray": "vision_msgs/Detection2DArray",
    "Detection2D": "vision_msgs/Detection2D",
    "BoundingBox2D": "vision_msgs/BoundingBox2D",
    "Pose2D": "vision_msgs/Pose2D",
    "Point2D": "vision_msgs/Point2D",
    "ObjectHypothesisWithPose": "vision_msgs/ObjectHypothesisWithPose",
    "ObjectHypothesis": "vision_msgs/ObjectHypothesis",
    "DiagnosticArray": "diagnostic_msgs/DiagnosticArray",
    "DiagnosticStatus": "diagnostic_msgs/DiagnosticStatus",
    "KeyValue": "diagnostic_msgs/KeyValue",
}


@dataclass(frozen=True)
class MessageTypes:
    """The rclpy message classes the outputs are made of (attribute name = the type's name)."""

    classes: Mapping[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["classes"][name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def load(cls) -> MessageTypes:
        """Import every class of :data:`MESSAGE_TYPES` from the sourced ROS 2 installation."""
        found = {}
        for attr, spec in MESSAGE_TYPES.items():
            package, name = spec.split("/")
            found[attr] = getattr(importlib.import_module(f"{package}.msg"), name)
        return cls(found)


@dataclass(frozen=True)
class MarkerSpec:
    """One marker of a frame, as plain data.

    Attributes:
        ns, id, type, action: the Marker fields. points: (x, y) image pixels (z = 0).
        colours: (r, g, b, a) in [0, 1], one per point; the marker's own colour is the first.
    """

    ns: str
    id: int
    type: int
    action: int
    points: tuple[tuple[float, float], ...] = ()
    colours: tuple[tuple[float, float, float, float], ...] = field(default=())


def marker_specs(result: Any, colours: Sequence[tuple[int, int, int]]) -> list[MarkerSpec]:
    """The markers of a frame's result (what :func:`pairedge.core.io.ros.messages.result_to_markers` draws).

    Args:
        result: a :class:`~pairedge.runtime.types.FrameResult`.
        colours: BGR colour per label id (as in the annotated video).
    """
    ids = result.track_ids.tolist()
    boxes = {int(t): b for t, b in zip(ids, result.boxes.tolist(), strict=True)}
    centres = {t: (float(x + w / 2), float(y + h / 2)) for t, (x, y, w, h) in boxes.items()}
    specs = [MarkerSpec("pairedge", 0, 0, DELETEALL)]
    points: list[tuple[float, float]] = []
    cols: list[tuple[float, float, float, float]] = []
    for (a, b), label in zip(
        result.pairs[result.interacting].tolist(), result.label_ids[result.interacting].tolist(), strict=True
    ):
        colour = _rgba(colours[int(label) % len(colours)])
        points += [centres[int(a)], centres[int(b)]]
        cols += [colour, colour]
    if points:
        specs.append(MarkerSpec("pairedge/pairs", 1, LINE_LIST, ADD, tuple(points), tuple(cols)))
    for k, group in enumerate(result.groups):
        corners = np.array([c for m in group.members for c in _corners(boxes[int(m)])], np.float32)
        hull = [(float(x), float(y)) for x, y in cv2.convexHull(corners).reshape(-1, 2)]
        bgr = colours[group.activity_id % len(colours)] if group.activity_id >= 0 else (200, 200, 200)
        ring = (*hull, hull[0])
        specs.append(MarkerSpec("pairedge/groups", 2 + k, LINE_STRIP, ADD, ring, (_rgba(bgr),) * len(ring)))
    return specs


def header_msg(types: MessageTypes, stamp: int, frame_id: str) -> Any:
    """A ``std_msgs/Header`` at ``stamp`` integer nanoseconds."""
    time = types.Time(sec=int(stamp // 1_000_000_000), nanosec=int(stamp % 1_000_000_000))
    return types.Header(stamp=time, frame_id=frame_id)


def string_msg(types: MessageTypes, record: Mapping[str, Any]) -> Any:
    """A ``std_msgs/String`` holding one JSON record."""
    return types.String(data=json.dumps(record, separators=(",", ":"), allow_nan=False))


def markers_msg(types: MessageTypes, specs: Sequence[MarkerSpec], header: Any) -> Any:
    """A ``visualization_msgs/MarkerArray`` of ``specs`` in the image's frame (line width 2 px)."""
    markers = []
    for s in specs:
        if s.action == DELETEALL:
            markers.append(types.Marker(header=header, ns=s.ns, id=s.id, action=DELETEALL))
            continue
        colours = [types.ColorRGBA(r=r, g=g, b=b, a=a) for r, g, b, a in s.colours]
        markers.append(
            types.Marker(
                header=header,
                ns=s.ns,
                id=s.id,
                type=s.type,
                action=s.action,
                pose=types.Pose(orientation=types.Quaternion(w=1.0)),
                scale=types.Vector3(x=2.0),
                color=colours[0],
                points=[types.Point(x=x, y=y) for x, y in s.points],
                colors=colours,
            )
        )
    return types.MarkerArray(markers=markers)


def pairs_msg(types: MessageTypes, result: Any, header: Any) -> Any:
    """The interacting pairs as a ``vision_msgs/Detection2DArray``, one ``Detection2D`` per pair.

    Encoding (vision_msgs 4.x): ``id`` = ``"A-B"`` (the two track ids, ``A < B``); ``bbox`` = the union of the
    two people's boxes (centre and size, pixels); ``results[0]`` = the pair's label (``class_id`` the label
    name, ``score`` its smoothed stage-2 probability), ``results[1]`` = ``class_id`` :data:`P_INTERACT_CLASS`
    with the smoothed stage-1 probability, ``results[2:]`` = every stage-2 class in the model's label order
    with its probability. Pairs that are scored but not interacting are left out.
    """
    boxes = {int(t): b for t, b in zip(result.track_ids.tolist(), result.boxes.tolist(), strict=True)}
    items = []
    for r in np.flatnonzero(result.interacting).tolist():
        a, b = (int(v) for v in result.pairs[r])
        (ax, ay, aw, ah), (bx, by, bw, bh) = boxes[a], boxes[b]
        x0, y0 = min(ax, bx), min(ay, by)
        x1, y1 = max(ax + aw, bx + bw), max(ay + ah, by + bh)
        probs = [float(p) for p in result.probs[r]]
        label = int(result.label_ids[r])
        hyps = [(result.labels[label], probs[label]), (P_INTERACT_CLASS, float(result.p_interact[r]))]
        hyps += list(zip(result.labels, probs, strict=True))
        results = [
            types.ObjectHypothesisWithPose(hypothesis=types.ObjectHypothesis(class_id=str(name), score=score))
            for name, score in hyps
        ]
        centre = types.Pose2D(position=types.Point2D(x=float(x0 + x1) / 2, y=float(y0 + y1) / 2))
        bbox = types.BoundingBox2D(center=centre, size_x=float(x1 - x0), size_y=float(y1 - y0))
        items.append(types.Detection2D(header=header, results=results, bbox=bbox, id=f"{a}-{b}"))
    return types.Detection2DArray(header=header, detections=items)


def diagnostics_msg(
    types: MessageTypes, stamp: int, level: int, message: str, values: Mapping[str, object]
) -> Any:
    """A ``diagnostic_msgs/DiagnosticArray`` with one status named ``pairedge: node``.

    Args:
        stamp: the report's time, integer nanoseconds (the node's clock).
        level: :data:`OK`, :data:`WARN` or :data:`ERROR`. values: key -> value (written with ``str``).
    """
    status = types.DiagnosticStatus(
        level=bytes([level]),
        name="pairedge: node",
        message=message,
        hardware_id="pairedge",
        values=[types.KeyValue(key=str(k), value=str(v)) for k, v in values.items()],
    )
    return types.DiagnosticArray(header=header_msg(types, stamp, ""), status=[status])


def _rgba(bgr: Sequence[int]) -> tuple[float, float, float, float]:
    b, g, r = bgr
    return r / 255.0, g / 255.0, b / 255.0, 1.0


def _corners(box: Sequence[float]) -> list[tuple[float, float]]:
    x, y, w, h = box
    return [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
