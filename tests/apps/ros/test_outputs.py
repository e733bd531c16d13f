"""The node's rclpy messages (pairedge.apps.ros.outputs), built with the strict fake message classes: the
markers equal the bag path's rosbags markers field by field, the pairs encoding says what docs/ros2.md says,
and a diagnostics level is the byte rclpy wants."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rosbags")

import fake_rclpy  # noqa: E402
from pairedge.apps.ros.outputs import (  # noqa: E402
    MESSAGE_TYPES,
    P_INTERACT_CLASS,
    MessageTypes,
    diagnostics_msg,
    header_msg,
    marker_specs,
    markers_msg,
    pairs_msg,
    string_msg,
)
from pairedge.core.io.ros.messages import result_to_markers  # noqa: E402
from pairedge.core.io.ros.msgdefs import make_typestore  # noqa: E402
from pairedge.core.palette import label_colours  # noqa: E402
from pairedge.runtime import Deployment  # noqa: E402


@pytest.fixture()
def types(monkeypatch: pytest.MonkeyPatch) -> MessageTypes:
    fake_rclpy.install(monkeypatch)
    return MessageTypes.load()  # imported from the fake message packages, as from a ROS install


@pytest.fixture(scope="module")
def results() -> list[Any]:
    """Results of a simulated scene with interacting pairs and groups (the bundled model, no flow)."""
    from pairedge.measure.sim import simulate

    out = []
    with Deployment(backend="ort-cpu", flow="none").load() as pipe:
        for f in simulate("static", seed=2, frames=20):
            out.append(pipe.step(f.image, f.truth, f.timestamp))
    assert any(r.interacting.any() for r in out) and any(r.groups for r in out)
    return out


def _fields(msg: Any) -> dict[str, Any]:
    return {name: getattr(msg, name) for name in msg.__slots__}


def test_message_types_name_every_class_the_builders_use(types: MessageTypes) -> None:
    assert set(types.classes) == set(MESSAGE_TYPES)
    for attr, spec in MESSAGE_TYPES.items():
        assert getattr(types, attr)._TYPE == spec.replace("/", "/msg/")


def test_markers_equal_the_bag_paths_markers(types: MessageTypes, results: list[Any]) -> None:
    store = make_typestore()
    labels = ("a", "b", "c", "d", "e")
    colours = label_colours(labels)
    compared = 0
    for k, result in enumerate(results):
        stamp = 1_700_000_000_123_456_789 + k
        ours = markers_msg(types, marker_specs(result, colours), header_msg(types, stamp, "cam"))
        theirs = result_to_markers(store, result, stamp, "cam", colours)
        assert len(ours.markers) == len(theirs.markers)
        for a, b in zip(ours.markers, theirs.markers, strict=True):
            assert (a.ns, a.id, a.type, a.action) == (b.ns, b.id, b.type, b.action)
            assert (a.header.stamp.sec, a.header.stamp.nanosec, a.header.frame_id) == (
                b.header.stamp.sec,
                b.header.stamp.nanosec,
                b.header.frame_id,
            )
            assert [(p.x, p.y, p.z) for p in a.points] == [(p.x, p.y, p.z) for p in b.points]
            assert [(c.r, c.g, c.b, c.a) for c in a.colors] == [(c.r, c.g, c.b, c.a) for c in b.colors]
            if b.action != 3:  # DELETEALL carries no geometry
                assert (a.scale.x, a.pose.orientation.w) == (b.scale.x, b.pose.orientation.w) == (2.0, 1.0)
                assert (a.color.r, a.color.g, a.color.b, a.color.a) == (
                    b.color.r,
                    b.color.g,
                    b.color.b,
                    b.color.a,
                )
            compared += len(a.points)
    assert compared > 0


def test_pairs_encoding(types: MessageTypes, results: list[Any]) -> None:
    result = next(r for r in results if r.interacting.sum() >= 2)
    msg = pairs_msg(types, result, header_msg(types, 5_000_000_001, "cam"))
    rows = np.flatnonzero(result.interacting)
    assert len(msg.detections) == len(rows)
    boxes = dict(zip(result.track_ids.tolist(), result.boxes.tolist(), strict=True))
    for det, r in zip(msg.detections, rows.tolist(), strict=True):
        a, b = result.pairs[r].tolist()
        assert det.id == f"{a}-{b}" and det.header.stamp.sec == 5 and det.header.stamp.nanosec == 1
        (ax, ay, aw, ah), (bx, by, bw, bh) = boxes[a], boxes[b]
        x0, y0, x1, y1 = min(ax, bx), min(ay, by), max(ax + aw, bx + bw), max(ay + ah, by + bh)
        assert det.bbox.size_x == pytest.approx(x1 - x0) and det.bbox.size_y == pytest.approx(y1 - y0)
        assert det.bbox.center.position.x == pytest.approx((x0 + x1) / 2)
        names = [h.hypothesis.class_id for h in det.results]
        scores = [h.hypothesis.score for h in det.results]
        label = result.labels[int(result.label_ids[r])]
        assert names == [label, P_INTERACT_CLASS, *result.labels]
        assert scores[0] == pytest.approx(float(result.probs[r, result.label_ids[r]]))
        assert scores[1] == pytest.approx(float(result.p_interact[r]))
        assert scores[2:] == pytest.approx(result.probs[r].tolist())
        assert scores[0] == max(scores[2:])  # the label is the most probable class


def test_string_and_diagnostics(types: MessageTypes) -> None:
    record = {"frame": 3, "interactions": [], "stamp_ns": 12}
    assert json.loads(string_msg(types, record).data) == record
    with pytest.raises(ValueError):  # NaN is not JSON
        string_msg(types, {"p": float("nan")})
    msg = diagnostics_msg(types, 7_000_000_000, 1, "2 new drops", {"frames": 4, "dropped: x": 2})
    (status,) = msg.status
    assert status.level == b"\x01" == types.DiagnosticStatus.WARN
    assert [(kv.key, kv.value) for kv in status.values] == [("frames", "4"), ("dropped: x", "2")]
    assert msg.header.stamp.sec == 7


def test_the_fake_refuses_what_rclpy_refuses(types: MessageTypes) -> None:
    """The builders' care (floats for float64 fields, bytes for a byte) is needed: the fake checks like
    rosidl."""
    with pytest.raises(AssertionError, match="float"):
        types.Point(x=1, y=2.0)
    with pytest.raises(AssertionError, match="bytes"):
        types.DiagnosticStatus(level=1)
    with pytest.raises(AssertionError, match="Invalid arguments"):
        types.Marker(texture_name="x")
    with pytest.raises(AssertionError, match="sequence"):
        fake_rclpy.message_classes()["sensor_msgs/msg/Image"](data=np.zeros(3, np.uint8))
