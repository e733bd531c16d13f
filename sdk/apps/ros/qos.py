"""The node's QoS profiles, made from the ``rclpy.qos`` module it is given (so importing this never needs
rclpy).

Inputs default to the sensor-data profile (best effort, volatile, keep last N): camera drivers publish
with it, and a subscriber that asks for reliable delivery hears nothing from a best-effort publisher. A
best-effort subscriber also hears reliable publishers (``ros2 bag play``), so "sensor_data" is the safe
default; "reliable" is for a pipeline where every message must arrive (it then queues instead of dropping).
Outputs are reliable, keep last N: consumers of interactions (a planner, ``ros2 bag record``) expect that.
"""

from __future__ import annotations

from typing import Any

from pairedge.apps.ros.node_params import QOS_PROFILES
from pairedge.core.errors import InputError


def input_qos(qos: Any, profile: str, depth: int) -> Any:
    """The QoS of the image and detections subscriptions.

    Args:
        qos: the ``rclpy.qos`` module.
        profile: "sensor_data" or "reliable" (:data:`~pairedge.apps.ros.node_params.QOS_PROFILES`).
        depth: history depth (keep last ``depth``).

    Raises:
        InputError: an unknown profile.
    """
    if profile not in QOS_PROFILES:
        raise InputError(f"qos: expected one of {', '.join(QOS_PROFILES)}, got {profile!r}")
    reliability = (
        qos.ReliabilityPolicy.BEST_EFFORT if profile == "sensor_data" else qos.ReliabilityPolicy.RELIABLE
    )
    return qos.QoSProfile(
        depth=depth,
        history=qos.HistoryPolicy.KEEP_LAST,
        reliability=reliability,
        durability=qos.DurabilityPolicy.VOLATILE,
    )


def output_qos(qos: Any, depth: int) -> Any:
    """The QoS of the output publishers: reliable, volatile, keep last ``depth``."""
    return qos.QoSProfile(
        depth=depth,
        history=qos.HistoryPolicy.KEEP_LAST,
        reliability=qos.ReliabilityPolicy.RELIABLE,
        durability=qos.DurabilityPolicy.VOLATILE,
    )
