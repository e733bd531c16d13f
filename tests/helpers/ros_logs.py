"""Shared builders for the ROS 2 log tests (tests/apps/ros, tests/core/io/ros): simulated frames, and logs
written message by message. Each folder's conftest imports the fixtures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: A log message: (topic, message type, a message object or raw CDR bytes, log time in ns).
Message = tuple[str, str, Any, int]


@pytest.fixture(scope="session")
def sim_frames() -> list[tuple[Any, Any, float]]:
    """Ten frames of a simulated scene with interactions: (BGR image, ground-truth boxes, seconds)."""
    from pairedge.measure.sim import simulate

    return [(f.image, f.truth, f.timestamp) for f in simulate("static", seed=2, frames=10)]


@pytest.fixture()
def write_messages() -> Callable[..., Path]:
    """``write_messages(path, messages, storage="mcap")``: a rosbag2 folder holding exactly ``messages``."""
    pytest.importorskip("rosbags")

    def write(path: Path, messages: list[Message], storage: str = "mcap") -> Path:
        from pairedge.core.io.ros.msgdefs import make_typestore
        from rosbags.rosbag2 import StoragePlugin, Writer

        store = make_typestore()
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        with Writer(path, version=9, storage_plugin=plugin) as writer:
            conns: dict[str, Any] = {}
            for topic, msgtype, msg, log_time in messages:
                if topic not in conns:
                    conns[topic] = writer.add_connection(topic, msgtype, typestore=store)
                raw = msg if isinstance(msg, bytes | bytearray) else store.serialize_cdr(msg, msgtype)
                writer.write(conns[topic], log_time, raw)
        return path

    return write


@pytest.fixture()
def frame_messages(sim_frames) -> Callable[..., list[Message]]:
    """``frame_messages(image=None, dets=None, start_ns=0)``: the ten frames as image + detection messages.

    ``image(k, msg)`` / ``dets(k, msg)`` may replace frame ``k``'s message (return a message, raw bytes, or
    None to leave it out); stamps are ``start_ns + round(t * 1e9)``, detections logged 1 ms after the image.
    """
    pytest.importorskip("rosbags")
    from pairedge.core.io.ros.messages import bgr_to_image, detections_to_msg
    from pairedge.core.io.ros.msgdefs import DETECTION_ARRAY, IMAGE, make_typestore

    store = make_typestore()

    def build(
        image: Callable | None = None, dets: Callable | None = None, start_ns: int = 0
    ) -> list[Message]:
        out: list[Message] = []
        for k, (bgr, boxes, t) in enumerate(sim_frames):
            stamp = start_ns + int(round(t * 1e9))
            img = bgr_to_image(store, bgr, stamp)
            det = detections_to_msg(store, boxes, stamp)
            img = image(k, img) if image is not None else img
            det = dets(k, det) if dets is not None else det
            if img is not None:
                out.append(("/camera/image_raw", getattr(img, "__msgtype__", IMAGE), img, stamp))
            if det is not None:
                out.append(("/detections", DETECTION_ARRAY, det, stamp + 1_000_000))
        return out

    build.store = store  # type: ignore[attr-defined]
    return build
