"""The live ROS 2 node builds its Deployment from its parameters and runs the same RosRunner as the bag path.

rclpy comes with ROS 2, not from pip, so the node runs here against stand-ins for the few rclpy and message
modules it imports (a Node that records publishers and subscriptions and answers parameters)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

pytest.importorskip("rosbags")

from pairedge.core.errors import InputError  # noqa: E402
from pairedge.runtime import Deployment  # noqa: E402


class FakeNode:
    """The part of ``rclpy.node.Node`` the pairedge node uses; parameters come from ``OVERRIDES``."""

    OVERRIDES: dict[str, Any] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self.publishers: list[tuple[Any, str]] = []
        self.subscriptions: list[tuple[Any, str]] = []
        self.destroyed = False

    def declare_parameter(self, name: str, default: Any) -> Any:
        return types.SimpleNamespace(value=self.OVERRIDES.get(name, default))

    def create_publisher(self, msg_type: Any, topic: str, depth: int) -> Any:
        self.publishers.append((msg_type, topic))
        return types.SimpleNamespace(publish=lambda msg: None)

    def create_subscription(self, msg_type: Any, topic: str, callback: Any, depth: int) -> None:
        self.subscriptions.append((msg_type, topic))

    def get_logger(self) -> Any:
        return types.SimpleNamespace(info=lambda text: None)

    def destroy_node(self) -> None:
        self.destroyed = True


@pytest.fixture()
def node_class(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``build_node``'s class with rclpy and the message packages replaced by stand-ins."""
    names = {"rclpy": {}, "rclpy.node": {"Node": FakeNode}, "rclpy.serialization": {"deserialize_message": None},
             "sensor_msgs": {}, "sensor_msgs.msg": {"Image": "Image", "CompressedImage": "CompressedImage"},
             "std_msgs": {}, "std_msgs.msg": {"String": "String"}, "vision_msgs": {},
             "vision_msgs.msg": {"Detection2DArray": "Detection2DArray"}, "visualization_msgs": {},
             "visualization_msgs.msg": {"MarkerArray": "MarkerArray"}}  # fmt: skip
    for name, attrs in names.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    from pairedge.apps.ros.node import build_node

    return build_node(sys.modules["rclpy"])


def test_node_runs_the_deployment_its_parameters_name(node_class: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeNode, "OVERRIDES", {"backend": "ort-cpu", "flow": "none", "compressed": True})
    node = node_class()
    try:
        assert node.deployment == Deployment(backend="onnxruntime", flow="none")  # "" model: the bundled one
        assert node.pipe.flow is None and node.runner.pipe is node.pipe
        assert ("CompressedImage", "/camera/image_raw") in node.subscriptions
        assert [topic for _, topic in node.publishers] == ["/pairedge/interactions", "/pairedge/markers"]
    finally:
        node.destroy_node()
    assert node.destroyed and not node.pipe.stage1.is_active


def test_node_refuses_a_wrong_backend_name_at_start(node_class: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeNode, "OVERRIDES", {"backend": "tensorflow"})
    with pytest.raises(InputError, match="unknown classifier backend 'tensorflow'"):
        node_class()
