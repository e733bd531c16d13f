"""Writing camera frames and detections as a ROS 2 log (what a robot records), e.g. from simulated scenes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.io.ros.messages import bgr_to_image, detections_to_msg
from pairedge.core.io.ros.msgdefs import DETECTION_ARRAY, IMAGE, make_typestore
from pairedge.core.optional import require
from pairedge.core.types import Detections

IMAGE_TOPIC = "/camera/image_raw"
DETECTIONS_TOPIC = "/detections"
STORAGES = ("mcap", "sqlite3")


def write_log(
    frames: Iterable[tuple[np.ndarray, Detections, float]],
    path: str | Path,
    *,
    storage: str = "mcap",
    image_topic: str = IMAGE_TOPIC,
    detections_topic: str = DETECTIONS_TOPIC,
    frame_id: str = "camera",
    start_ns: int = 0,
) -> int:
    """Write ``(image, detections, timestamp)`` items as a rosbag2 log folder; returns the frame count.

    Args:
        frames: (H, W, 3) uint8 BGR images, their detections and timestamps in seconds.
        path: the log folder to create (must not exist).
        storage: "mcap" or "sqlite3".
        start_ns: added to every stamp, in integer nanoseconds (e.g. ``1_700_000_000 * 10**9`` for stamps
            like a robot's clock since the epoch; kept exact, unlike a float second at that magnitude).

    Each frame is one ``sensor_msgs/Image`` (bgr8) and one ``vision_msgs/Detection2DArray`` with the same
    header stamp, logged at that stamp (detections 1 ms later, as a detector would publish them).
    """
    if storage not in STORAGES:
        raise InputError(f"storage: expected one of {', '.join(STORAGES)}, got {storage!r}")
    rosbag2 = require("rosbags.rosbag2", extra="ros", purpose="writing ROS 2 logs")
    store = make_typestore()
    plugin = rosbag2.StoragePlugin.MCAP if storage == "mcap" else rosbag2.StoragePlugin.SQLITE3
    count = 0
    with rosbag2.Writer(Path(path), version=9, storage_plugin=plugin) as writer:
        images = writer.add_connection(image_topic, IMAGE, typestore=store)
        dets = writer.add_connection(detections_topic, DETECTION_ARRAY, typestore=store)
        for image, detections, timestamp in frames:
            stamp = int(start_ns) + int(round(timestamp * 1e9))
            msg = bgr_to_image(store, image, stamp, frame_id)
            writer.write(images, stamp, store.serialize_cdr(msg, IMAGE))
            det_msg = detections_to_msg(store, detections, stamp, frame_id)
            writer.write(dets, stamp + 1_000_000, store.serialize_cdr(det_msg, DETECTION_ARRAY))
            count += 1
    return count
