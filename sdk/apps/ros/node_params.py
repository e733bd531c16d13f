"""The ROS 2 node's parameters: one table that the node declares, the package's YAML is checked against and
the docs' table is generated from.

:data:`PARAMETERS` lists every parameter with its default, its ROS parameter type and what it does.
:class:`NodeConfig` is the checked value the node runs with (each field one parameter, checked once with the
one-line :class:`~pairedge.core.errors.InputError` a robot's log shows). :func:`render_yaml` writes
``ros2/pairedge_ros/config/pairedge.yaml`` and :func:`markdown_table` the table of ``docs/ros2.md``; tests
hold both files to them, so code, parameter file and docs cannot drift apart.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pairedge.core.errors import InputError
from pairedge.runtime.config import TRACKING_MODES
from pairedge.runtime.detectors.bundled import DEFAULT_DETECTOR
from pairedge.runtime.tracker_backends import DEFAULT_TRACKER, TRACKER_NAMES, check_tracker_name

#: QoS profiles of the input subscriptions: "sensor_data" (best effort, keep last ``qos_depth``: what
#: camera drivers publish with) or "reliable" (reliable, keep last ``qos_depth``: a reliable publisher
#: such as ``ros2 bag play``; a best-effort subscriber also hears reliable publishers, not the reverse).
QOS_PROFILES: tuple[str, ...] = ("sensor_data", "reliable")
#: Most classes a ``classes`` filter may name, and the longest string parameter (bounded configuration).
MAX_CLASSES, MAX_TEXT = 1000, 4096


@dataclass(frozen=True)
class Parameter:
    """One ROS parameter of the node.

    Attributes:
        name: the parameter name (``--ros-args -p name:=value``).
        default: its default; its Python type is the ROS parameter type (str: STRING, bool: BOOL,
            int: INTEGER, float: DOUBLE), so a YAML value of another type is refused by rclpy.
        description: one line for the YAML comment, the docs and the parameter descriptor.
    """

    name: str
    default: str | bool | int | float
    description: str

    @property
    def type_name(self) -> str:
        """The ROS parameter type: "string", "bool", "integer" or "double"."""
        return {str: "string", bool: "bool", int: "integer", float: "double"}[type(self.default)]


#: Every parameter of the node, in the order of the YAML file and the docs.
PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        "model",
        "",
        "model folder (stage1.onnx + stage2.onnx, calibrated variants); empty = the bundled model",
    ),
    Parameter("precision", "fp32", "which files of the model folder run: fp32, fp16 or int8"),
    Parameter(
        "backend",
        "auto",
        "classifier backend: auto, onnxruntime, onnxruntime-cuda, onnxruntime-tensorrt, "
        "tensorrt (or an alias such as ort-cpu, ort-cuda, trt)",
    ),
    Parameter(
        "flow", "auto", "optical flow backend: auto (the model's), dis, farneback, reference, cuda, none"
    ),
    Parameter(
        "detector",
        DEFAULT_DETECTOR,
        "the person detector run on each image (the node then subscribes to the image only): "
        f"'{DEFAULT_DETECTOR}' (the bundled CNN, the default), 'hog' (OpenCV's people detector), an .onnx or "
        ".engine detector path; empty = boxes come from detections_topic",
    ),
    Parameter(
        "detector_backend",
        "onnxruntime",
        "ONNX Runtime provider of an .onnx detector: onnxruntime, onnxruntime-cuda or onnxruntime-tensorrt",
    ),
    Parameter(
        "tracker",
        DEFAULT_TRACKER,
        f"tracker backend that gives ids: {', '.join(TRACKER_NAMES)} "
        f"(pairedge.runtime.tracker_backends; {DEFAULT_TRACKER} is built in, the others need the trackers "
        "library)",
    ),
    Parameter(
        "tracking",
        "auto",
        "auto = track detections that carry no id, always = ignore given ids, "
        "never = use the detector's ids as they are",
    ),
    Parameter(
        "image_topic",
        "image",
        "sensor_msgs/Image input (CompressedImage when compressed is true); a "
        "relative name, remapped by the launch file",
    ),
    Parameter(
        "detections_topic",
        "detections",
        "vision_msgs/Detection2DArray input (unused when detector is set); remapped by the launch file",
    ),
    Parameter("compressed", False, "subscribe to sensor_msgs/CompressedImage instead of sensor_msgs/Image"),
    Parameter(
        "stamp_tolerance", 0.01, "largest image / detections header stamp difference of a pair, seconds"
    ),
    Parameter("classes", "", "comma-separated detection class ids to keep (e.g. 'person,1'); empty = all"),
    Parameter(
        "max_people",
        100,
        "at most this many detections per frame go on (the most confident); bounds "
        "the work per frame at n(n-1)/2 pairs",
    ),
    Parameter("qos", "sensor_data", "QoS of the input subscriptions: sensor_data (best effort) or reliable"),
    Parameter("qos_depth", 5, "history depth (keep last N) of each input subscription"),
    Parameter(
        "pairing_queue",
        64,
        "most unpaired images and most unpaired detection messages kept while "
        "waiting for their partner (the oldest is dropped beyond it)",
    ),
    Parameter("output_depth", 10, "history depth of the output publishers (reliable, keep last N)"),
    Parameter(
        "diagnostics_period", 1.0, "seconds between diagnostic_msgs/DiagnosticArray reports on /diagnostics"
    ),
)

_BY_NAME: Mapping[str, Parameter] = {p.name: p for p in PARAMETERS}


@dataclass(frozen=True)
class NodeConfig:
    """The node's parameters, checked. Field names and defaults are :data:`PARAMETERS`'s.

    Raises:
        InputError: a value of the wrong type or out of range, naming the parameter.
    """

    model: str = ""
    precision: str = "fp32"
    backend: str = "auto"
    flow: str = "auto"
    detector: str = DEFAULT_DETECTOR
    detector_backend: str = "onnxruntime"
    tracker: str = DEFAULT_TRACKER
    tracking: str = "auto"
    image_topic: str = "image"
    detections_topic: str = "detections"
    compressed: bool = False
    stamp_tolerance: float = 0.01
    classes: str = ""
    max_people: int = 100
    qos: str = "sensor_data"
    qos_depth: int = 5
    pairing_queue: int = 64
    output_depth: int = 10
    diagnostics_period: float = 1.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value, kind = getattr(self, f.name), type(_BY_NAME[f.name].default)
            if kind is float and type(value) is int:  # a YAML "1" for a double: what was meant is clear
                object.__setattr__(self, f.name, float(value))
            elif type(value) is not kind:
                type_name = _BY_NAME[f.name].type_name
                raise InputError(
                    f"parameter {f.name}: expected {'an' if type_name == 'integer' else 'a'} "
                    f"{type_name}, got {value!r}"
                )
            if kind is str and len(value) > MAX_TEXT:
                raise InputError(
                    f"parameter {f.name}: expected at most {MAX_TEXT} characters, got {len(value)}"
                )
        _choice("qos", self.qos, QOS_PROFILES)
        _choice("tracking", self.tracking, TRACKING_MODES)
        try:
            object.__setattr__(self, "tracker", check_tracker_name(self.tracker))
        except InputError as exc:
            raise InputError(f"parameter tracker: {exc}") from None
        for name in ("image_topic", "detections_topic"):
            if not getattr(self, name).strip():
                raise InputError(f"parameter {name}: expected a topic name, got an empty string")
        _bounded("stamp_tolerance", self.stamp_tolerance, 0.0, 10.0)
        _bounded("diagnostics_period", self.diagnostics_period, 0.05, 3600.0)
        _bounded("max_people", self.max_people, 2, 100_000)
        _bounded("qos_depth", self.qos_depth, 1, 1000)
        _bounded("pairing_queue", self.pairing_queue, 2, 10_000)
        _bounded("output_depth", self.output_depth, 1, 1000)
        self.class_set()  # checked here, once

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> NodeConfig:
        """The config of ``values`` (parameter name -> value; missing names keep their defaults).

        Raises:
            InputError: an unknown parameter name, or a bad value.
        """
        unknown = sorted(set(values) - set(_BY_NAME))
        if unknown:
            raise InputError(
                f"unknown parameter(s) {', '.join(unknown)}; expected names of "
                "pairedge.apps.ros.node_params.PARAMETERS"
            )
        return cls(**dict(values))

    def class_set(self) -> frozenset[str] | None:
        """The ``classes`` filter as a set of class ids (None: keep every class)."""
        names = frozenset(c.strip() for c in self.classes.split(",") if c.strip())
        if len(names) > MAX_CLASSES:
            raise InputError(f"parameter classes: expected at most {MAX_CLASSES} class ids, got {len(names)}")
        return names or None

    @property
    def uses_detector(self) -> bool:
        """True when the node runs a person detector on each image (no detections subscription)."""
        return bool(self.detector.strip())


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"parameter {name}: expected one of {', '.join(choices)}, got {value!r}")


def _bounded(name: str, value: float, low: float, high: float) -> None:
    if not (math.isfinite(value) and low <= value <= high):
        raise InputError(f"parameter {name}: expected a number in [{low:g}, {high:g}], got {value}")


def yaml_scalar(value: str | bool | int | float) -> str:
    """A default as YAML writes it (strings double-quoted, JSON escapes, which YAML reads the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


#: The parameter file's node key: ``/**`` matches the node under any name and namespace (a launch file that
#: puts it in a namespace or renames it still gives it its parameters).
YAML_NODE_KEY = "/**"


def render_yaml(node_key: str = YAML_NODE_KEY) -> str:
    """The parameter file ``ros2/pairedge_ros/config/pairedge.yaml``: every parameter at its default, each
    with its description (and ROS type) as the comment above it."""
    lines = [
        "# Parameters of the pairedge ROS 2 node (pairedge_ros/pairedge_node), every one at its default.",
        "# Generated from pairedge.apps.ros.node_params.PARAMETERS; tests/apps/ros/test_ros_package.py holds",
        "# this file to that table. Types are ROS parameter types: write 0.5, not 0, for a double.",
        f"{node_key}:",
        "  ros__parameters:",
    ]
    for p in PARAMETERS:
        lines.append(f"    # {p.description} ({p.type_name})")
        lines.append(f"    {p.name}: {yaml_scalar(p.default)}")
    return "\n".join(lines) + "\n"


def markdown_table() -> str:
    """The parameters table of ``docs/ros2.md`` (name, default, type, description)."""
    rows = ["| parameter | default | type | description |", "|---|---|---|---|"]
    for p in PARAMETERS:
        description = p.description.replace("|", "\\|")
        rows.append(f"| `{p.name}` | `{yaml_scalar(p.default)}` | {p.type_name} | {description} |")
    return "\n".join(rows) + "\n"
