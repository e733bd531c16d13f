"""The pairedge ROS 2 node: camera images (and detections) in; interactions, markers, pairs and diagnostics
out.

Installed as the ``pairedge_node`` executable of the ament_python package ``ros2/pairedge_ros`` (build it with
colcon and start it with ``ros2 launch pairedge_ros pairedge.launch.py``, see docs/ros2.md); pairedge itself
is pip-installed into the Python that ROS 2 runs. ``python -m pairedge.apps.ros.node --ros-args ...`` runs the
same node without the package. It imports ``rclpy`` only when started.

Parameters: :data:`pairedge.apps.ros.node_params.PARAMETERS` (one table: the node declares it, the package's
YAML and the docs are checked against it). Inputs are subscribed with the sensor-data QoS by default (best
effort; ``qos:=reliable`` for reliable publishers that must not lose a message).

Threads: the subscription callbacks only pair stamps and put the newest pair into a one-slot buffer; one
worker thread decodes, runs the detector (when ``detector`` is set), steps the pipeline and publishes
(:mod:`pairedge.apps.ros.node_core`). A pair replaced before the worker took it is counted as dropped.

Publishes (reliable, keep last ``output_depth``):

- ``/pairedge/interactions`` ``std_msgs/String``: the JSON record of each frame (``results.jsonl`` schema
  plus ``stamp_ns``);
- ``/pairedge/markers`` ``visualization_msgs/MarkerArray`` in the image frame;
- ``/pairedge/pairs`` ``vision_msgs/Detection2DArray``: one detection per interacting pair
  (:func:`pairedge.apps.ros.outputs.pairs_msg` gives the encoding);
- ``/diagnostics`` ``diagnostic_msgs/DiagnosticArray`` every ``diagnostics_period`` seconds: frames, time per
  frame, drops per reason.

Messages are built directly as rclpy messages (:mod:`pairedge.apps.ros.outputs`), with no CDR round trip. At
shutdown the worker thread is joined (the frame in hand finishes) and the summary is logged.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from pairedge.apps.ros.bagcopy import MARKERS_TOPIC, RESULTS_TOPIC
from pairedge.apps.ros.node_core import NodeCore
from pairedge.apps.ros.node_params import PARAMETERS, NodeConfig
from pairedge.apps.ros.outputs import (
    MessageTypes,
    diagnostics_msg,
    header_msg,
    marker_specs,
    markers_msg,
    pairs_msg,
    string_msg,
)
from pairedge.apps.ros.qos import input_qos, output_qos
from pairedge.apps.ros.runner import Output
from pairedge.core.errors import MissingDependencyError, PairedgeError
from pairedge.core.palette import label_colours
from pairedge.runtime.runner.run import open_run_detector

#: Node name (the launch file names it the same), and the output topics beyond the bag path's two.
NODE_NAME = "pairedge"
PAIRS_TOPIC = "/pairedge/pairs"
DIAGNOSTICS_TOPIC = "/diagnostics"


def open_pipeline(config: NodeConfig) -> tuple[Any, Any | None, str]:
    """The pipeline of ``config``, its activated person detector when ``config.detector`` is set (else None),
    and one line that says what runs (for the log).

    Raises:
        InputError, ModelError, BackendError: as :meth:`Deployment.load` and :func:`open_run_detector`.
    """

    deployment = config.deployment
    pipe = deployment.load(config.pipeline_config(detector=config.uses_detector))
    if not config.uses_detector:
        return pipe, None, deployment.describe()
    try:
        detector = open_run_detector(config).activate()
        return pipe, detector, f"{deployment.describe()}, detector {detector.describe()}"
    except BaseException:
        pipe.close()
        raise


def build_node(rclpy: Any) -> Any:
    """The node class (defined here so that importing this module never needs rclpy)."""
    import rclpy.qos as qos
    from rcl_interfaces.msg import ParameterDescriptor
    from rclpy.node import Node
    from sensor_msgs.msg import CompressedImage, Image
    from vision_msgs.msg import Detection2DArray

    class PairedgeNode(Node):  # type: ignore[misc]
        """pairedge on a robot (module docstring of :mod:`pairedge.apps.ros.node`)."""

        def __init__(self, **node_options: Any) -> None:
            super().__init__(NODE_NAME, **node_options)
            values = {
                p.name: self.declare_parameter(
                    p.name, p.default, ParameterDescriptor(description=p.description, read_only=True)
                ).value
                for p in PARAMETERS
            }
            self.config = config = NodeConfig.from_values(values)
            self.types = MessageTypes.load()
            pipe, detector, what = open_pipeline(config)
            self.colours = label_colours(pipe.labels)
            out = output_qos(qos, config.output_depth)
            self.results = self.create_publisher(self.types.String, RESULTS_TOPIC, out)
            self.markers = self.create_publisher(self.types.MarkerArray, MARKERS_TOPIC, out)
            self.pairs = self.create_publisher(self.types.Detection2DArray, PAIRS_TOPIC, out)
            self.diagnostics = self.create_publisher(self.types.DiagnosticArray, DIAGNOSTICS_TOPIC, out)
            self.core = NodeCore(config, pipe, self._publish, detector, log=self.get_logger().warning)
            inputs = input_qos(qos, config.qos, config.qos_depth)
            self.create_subscription(
                CompressedImage if config.compressed else Image,
                config.image_topic,
                self.core.on_image,
                inputs,
            )
            if not config.uses_detector:
                self.create_subscription(
                    Detection2DArray, config.detections_topic, self.core.on_detections, inputs
                )
            self.timer = self.create_timer(config.diagnostics_period, self._diagnose)
            source = "the detector" if config.uses_detector else config.detections_topic
            self.get_logger().info(
                f"pairedge: {what}; images from {config.image_topic}, boxes from {source}, "
                f"QoS {config.qos} depth {config.qos_depth}"
            )

        def _publish(self, output: Output) -> None:
            """The worker thread's output: one frame's three messages."""
            header = header_msg(self.types, output.stamp, output.frame_id)
            self.results.publish(string_msg(self.types, output.record))
            self.markers.publish(markers_msg(self.types, marker_specs(output.result, self.colours), header))
            self.pairs.publish(pairs_msg(self.types, output.result, header))

        def _diagnose(self) -> None:
            report = self.core.report()
            stamp = int(self.get_clock().now().nanoseconds)
            self.diagnostics.publish(
                diagnostics_msg(self.types, stamp, report.level, report.message, report.values)
            )

        def destroy_node(self) -> None:
            joined, drops = self.core.shutdown()
            logger = self.get_logger()
            if not joined:
                logger.warning(
                    "pairedge: the inference thread did not finish its frame in time; left running"
                )
            listed = "; ".join(f"{reason}: {n}" for reason, n in drops.most_common()) or "none"
            logger.info(
                f"pairedge: {self.core.frames} frames published; dropped {sum(drops.values())} ({listed})"
            )
            super().destroy_node()

    return PairedgeNode


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``pairedge_node`` and ``python -m pairedge.apps.ros.node --ros-args -p name:=value``."""
    try:
        import rclpy
    except ImportError as exc:
        raise MissingDependencyError(
            f"the pairedge ROS 2 node needs rclpy, which comes with ROS 2, not from pip ({exc}); install ROS "
            "2 (Humble or later) with vision_msgs, then `source /opt/ros/<distro>/setup.bash` and run it "
            "again"
        ) from exc
    try:  # Iron and later end spin on Ctrl-C with this; Humble raises KeyboardInterrupt
        from rclpy.executors import ExternalShutdownException as shutdown_error
    except ImportError:
        shutdown_error = KeyboardInterrupt
    rclpy.init(args=list(argv) if argv is not None else None)
    node = None
    try:
        node = build_node(rclpy)()
        rclpy.spin(node)
    except (KeyboardInterrupt, shutdown_error):
        pass
    except PairedgeError as exc:  # a bad parameter, model or backend: one line, exit status 1
        print(f"pairedge_node: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
