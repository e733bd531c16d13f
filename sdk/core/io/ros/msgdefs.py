"""Message types pairedge reads and writes in ROS 2 logs, and the rosbags type store that knows them.

``sensor_msgs``, ``std_msgs``, ``geometry_msgs`` and ``visualization_msgs`` are in rosbags' built-in ROS 2
type store; ``vision_msgs`` (the detector output) is not, so its definitions are registered here from the
message definitions of vision_msgs 4.x (ROS 2 Humble and later, where ``BoundingBox2D.center`` is a
``vision_msgs/Pose2D``). A log that embeds its own definitions (rosbag2 MCAP and sqlite3 version 9 do)
is read with those instead, so older layouts (``geometry_msgs/Pose2D`` centres, Foxy) work too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pairedge.core.optional import require

IMAGE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
DETECTION_ARRAY = "vision_msgs/msg/Detection2DArray"
STRING = "std_msgs/msg/String"
MARKER_ARRAY = "visualization_msgs/msg/MarkerArray"

#: vision_msgs 4.x definitions (``.msg`` text), type name -> definition.
VISION_MSGS: dict[str, str] = {
    "vision_msgs/msg/Point2D": "float64 x\nfloat64 y\n",
    "vision_msgs/msg/Pose2D": "vision_msgs/Point2D position\nfloat64 theta\n",
    "vision_msgs/msg/BoundingBox2D": "vision_msgs/Pose2D center\nfloat64 size_x\nfloat64 size_y\n",
    "vision_msgs/msg/ObjectHypothesis": "string class_id\nfloat64 score\n",
    "vision_msgs/msg/ObjectHypothesisWithPose": (
        "vision_msgs/ObjectHypothesis hypothesis\ngeometry_msgs/PoseWithCovariance pose\n"
    ),
    "vision_msgs/msg/Detection2D": (
        "std_msgs/Header header\nvision_msgs/ObjectHypothesisWithPose[] results\n"
        "vision_msgs/BoundingBox2D bbox\nstring id\n"
    ),
    "vision_msgs/msg/Detection2DArray": "std_msgs/Header header\nvision_msgs/Detection2D[] detections\n",
}


def make_typestore(connections: Iterable[Any] = ()) -> Any:
    """A ROS 2 Humble type store plus vision_msgs, plus the definitions embedded in ``connections``.

    Args:
        connections: rosbags connections of a log; their embedded ``.msg`` definitions (when present)
            replace the built-in ones, so a log is decoded with the layout it was written with.
    """
    typesys = require("rosbags.typesys", extra="ros", purpose="reading and writing ROS 2 logs")
    store = typesys.get_typestore(typesys.Stores.ROS2_HUMBLE)
    types: dict[str, Any] = {}
    for name, text in VISION_MSGS.items():
        types.update(typesys.get_types_from_msg(text, name))
    embedded: dict[str, Any] = {}
    for conn in connections:
        msgdef = getattr(conn, "msgdef", None)
        data = getattr(msgdef, "data", "") if msgdef is not None else ""
        fmt = str(getattr(msgdef, "format", "")).lower()
        if data and "msg" in fmt and conn.msgtype not in store.types:
            try:
                embedded.update(typesys.get_types_from_msg(data, conn.msgtype))
            except Exception:  # a definition rosbags cannot parse: keep the built-in one
                continue
    types.update(embedded)
    store.register({k: v for k, v in types.items() if k not in store.types})
    return store
