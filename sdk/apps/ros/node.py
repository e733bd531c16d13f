"""A ROS 2 node: camera images and detections in, pairedge's interactions and markers out.

A thin shell around :class:`~pairedge.apps.ros.runner.RosRunner` (the same code the bag path runs and the tests
exercise). It imports ``rclpy`` only when started, so it needs a sourced ROS 2 installation (Humble or
later) with ``vision_msgs`` and ``visualization_msgs``; pairedge itself is pip-installed into that Python::

    source /opt/ros/humble/setup.bash
    pip install 'pairedge[ros]'
    python -m pairedge.apps.ros.node --ros-args -p image_topic:=/camera/image_raw -p detections_topic:=/detections \\
        -p model:=/path/to/model_dir

Parameters: ``image_topic`` (sensor_msgs/Image; ``compressed:=true`` for CompressedImage),
``detections_topic`` (vision_msgs/Detection2DArray), ``model`` (folder; empty = the bundled model),
``backend``, ``flow``, ``tolerance`` (seconds, default 0.01), ``classes`` (comma-separated class ids to
keep; empty = all). Publishes ``/pairedge/interactions`` (std_msgs/String, the JSON record of each frame)
and ``/pairedge/markers`` (visualization_msgs/MarkerArray in the image frame).

Stamps follow :mod:`pairedge.apps.ros.matching`: the first results are published once three distinct header
stamps agree (about 0.1 s at 30 fps), and a stamp that jumps is held until the messages after it confirm it.
Drops are counted per reason and logged when the node shuts down.

Output messages are built by the runner as rosbags messages and handed to rclpy through their CDR bytes,
which both sides define identically; that keeps one message builder for logs and live topics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pairedge.apps.ros.bag import MARKERS_TOPIC, RESULTS_TOPIC
from pairedge.apps.ros.msgdefs import MARKER_ARRAY, STRING, make_typestore
from pairedge.apps.ros.runner import Output, RosRunner
from pairedge.core.errors import MissingDependencyError


def build_node(rclpy: Any) -> Any:
    """The node class (defined here so importing this module never needs rclpy)."""
    from rclpy.node import Node
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import CompressedImage, Image
    from std_msgs.msg import String
    from vision_msgs.msg import Detection2DArray
    from visualization_msgs.msg import MarkerArray

    class PairedgeNode(Node):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__("pairedge")
            from pairedge.runtime.deployment import Deployment

            p = {name: self.declare_parameter(name, default).value for name, default in (
                ("image_topic", "/camera/image_raw"), ("detections_topic", "/detections"), ("model", ""),
                ("backend", "auto"), ("flow", "auto"), ("tolerance", 0.01), ("classes", ""),
                ("compressed", False))}  # fmt: skip
            classes = frozenset(c.strip() for c in str(p["classes"]).split(",") if c.strip()) or None
            self.deployment = Deployment(p["model"] or None, backend=p["backend"], flow=p["flow"])
            self.pipe = self.deployment.load()
            self.store = make_typestore()
            self.runner = RosRunner(self.pipe, self.store, tolerance_s=float(p["tolerance"]), classes=classes)
            self.results = self.create_publisher(String, RESULTS_TOPIC, 10)
            self.markers = self.create_publisher(MarkerArray, MARKERS_TOPIC, 10)
            self._types = (String, MarkerArray)
            image_type = CompressedImage if p["compressed"] else Image
            self.create_subscription(image_type, p["image_topic"], self._on_image, 5)
            self.create_subscription(Detection2DArray, p["detections_topic"], self._on_detections, 5)

        def _on_image(self, msg: Any) -> None:
            self._publish(self.runner.image(msg))

        def _on_detections(self, msg: Any) -> None:
            self._publish(self.runner.detections(msg))

        def _publish(self, outputs: list[Output]) -> None:
            string_type, markers_type = self._types
            for out in outputs:
                cdr = bytes(self.store.serialize_cdr(out.string, STRING))
                self.results.publish(deserialize_message(cdr, string_type))
                cdr = bytes(self.store.serialize_cdr(out.markers, MARKER_ARRAY))
                self.markers.publish(deserialize_message(cdr, markers_type))

        def destroy_node(self) -> None:
            dropped = self.runner.finish()
            if dropped:
                self.get_logger().info(f"dropped: {dict(dropped)}")
            self.pipe.close()
            super().destroy_node()

    return PairedgeNode


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: ``python -m pairedge.apps.ros.node --ros-args -p name:=value ...``."""
    try:
        import rclpy
    except ImportError as exc:
        raise MissingDependencyError(
            f"the pairedge ROS 2 node needs rclpy, which comes with ROS 2, not from pip ({exc}); install ROS 2 "
            "(Humble or later) with vision_msgs, then `source /opt/ros/<distro>/setup.bash` and run it again"
        ) from exc
    rclpy.init(args=list(argv) if argv is not None else None)
    node = build_node(rclpy)()
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
