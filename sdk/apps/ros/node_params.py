"""The ROS 2 node's parameters: one table that the node declares, the package's YAML is checked against and
the docs' table is generated from.

:data:`PARAMETERS` lists every parameter with its default, its ROS parameter type and what it does, read off
the settings' fields: the run settings the node shares with ``pairedge run``
(:data:`pairedge.runtime.settings.SETTINGS`, ``ros=True``) and the node's own fields of :class:`NodeConfig`,
the checked value the node runs with (checked once with the one-line
:class:`~pairedge.core.errors.InputError` a robot's log shows). :func:`render_yaml` writes
``ros2/pairedge_ros/config/pairedge.yaml`` and :func:`markdown_table` the table of ``docs/ros2.md``; tests
hold both files to them, so code, parameter file and docs cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairedge.core.errors import InputError
from pairedge.core.settings import Setting, declared, setting
from pairedge.runtime.settings import SETTINGS, RunSettings

#: QoS profiles of the input subscriptions: "sensor_data" (best effort, keep last ``qos_depth``: what
#: camera drivers publish with) or "reliable" (reliable, keep last ``qos_depth``: a reliable publisher
#: such as ``ros2 bag play``; a best-effort subscriber also hears reliable publishers, not the reverse).
QOS_PROFILES: tuple[str, ...] = ("sensor_data", "reliable")
#: Most classes a ``classes`` filter may name, and the longest string parameter (bounded configuration).
MAX_CLASSES, MAX_TEXT = 1000, 4096


@dataclass(frozen=True)
class Parameter:
    """One ROS parameter of the node (read off its setting).

    Attributes:
        name: the parameter name (``--ros-args -p name:=value``).
        default: its default; its Python type is the ROS parameter type (str: STRING, bool: BOOL,
            int: INTEGER, float: DOUBLE), so a YAML value of another type is refused by rclpy. A setting
            whose default is None ("none", "the model's") has the empty string.
        description: one line for the YAML comment, the docs and the parameter descriptor.
        setting: the setting it stands for.
    """

    name: str
    default: str | bool | int | float
    description: str
    setting: Setting

    @property
    def type_name(self) -> str:
        """The ROS parameter type: "string", "bool", "integer" or "double"."""
        return {str: "string", bool: "bool", int: "integer", float: "double"}[type(self.default)]


@dataclass(frozen=True)
class NodeConfig(RunSettings):
    """The node's parameters, checked: the run settings the node has as parameters (``ros=True``: model,
    precision, backend, flow, tracking, tracker, max_people, detector, detector_backend) in
    :attr:`deployment`, :attr:`config` and :attr:`detector`, and the node's own below, each declared once
    here with its default and description. :data:`PARAMETERS` is read off them.

    Raises:
        InputError: a value of the wrong type or out of range, naming the parameter.
    """

    image_topic: str = field(
        default="image",
        metadata=setting(
            "sensor_msgs/Image input (CompressedImage when compressed is true); a relative name, remapped by "
            "the launch file",
            ros=True,
        ),
    )
    detections_topic: str = field(
        default="detections",
        metadata=setting(
            "vision_msgs/Detection2DArray input (unused when detector is set); remapped by the launch file",
            ros=True,
        ),
    )
    compressed: bool = field(
        default=False,
        metadata=setting("subscribe to sensor_msgs/CompressedImage instead of sensor_msgs/Image", ros=True),
    )
    stamp_tolerance: float = field(
        default=0.01,
        metadata=setting(
            "largest image / detections header stamp difference of a pair, seconds",
            low=0.0,
            high=10.0,
            ros=True,
        ),
    )
    classes: str = field(
        default="",
        metadata=setting(
            "comma-separated detection class ids to keep (e.g. 'person,1'); empty = all", ros=True
        ),
    )
    qos: str = field(
        default="sensor_data",
        metadata=setting(
            "QoS of the input subscriptions: sensor_data (best effort) or reliable",
            choices=QOS_PROFILES,
            ros=True,
        ),
    )
    qos_depth: int = field(
        default=5,
        metadata=setting(
            "history depth (keep last N) of each input subscription", low=1, high=1000, ros=True
        ),
    )
    pairing_queue: int = field(
        default=64,
        metadata=setting(
            "most unpaired images and most unpaired detection messages kept while waiting for their partner "
            "(the oldest is dropped beyond it)",
            low=2,
            high=10_000,
            ros=True,
        ),
    )
    output_depth: int = field(
        default=10,
        metadata=setting(
            "history depth of the output publishers (reliable, keep last N)", low=1, high=1000, ros=True
        ),
    )
    diagnostics_period: float = field(
        default=1.0,
        metadata=setting(
            "seconds between diagnostic_msgs/DiagnosticArray reports on /diagnostics",
            low=0.05,
            high=3600.0,
            ros=True,
        ),
    )

    def __post_init__(self) -> None:
        for name in ("image_topic", "detections_topic"):
            if not getattr(self, name).strip():
                raise InputError(f"parameter {name}: expected a topic name, got an empty string")
        self.class_set()  # checked here, once

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> NodeConfig:  # type: ignore[override]
        """The config of ``values`` (parameter name -> value; missing names keep their defaults).

        Raises:
            InputError: an unknown parameter name, or a bad value (naming the parameter).
        """
        unknown = sorted(set(values) - set(_BY_NAME))
        if unknown:
            raise InputError(
                f"unknown parameter(s) {', '.join(unknown)}; expected names of "
                "pairedge.apps.ros.node_params.PARAMETERS"
            )
        checked = {name: _checked(_BY_NAME[name], value) for name, value in values.items()}
        run = {n: v for n, v in checked.items() if n in SETTINGS}
        for name, value in run.items():  # one at a time: the error names the parameter
            try:
                RunSettings.from_values({name: value})
            except InputError as exc:
                raise InputError(f"parameter {name}: {str(exc).removeprefix(name + ': ')}") from None
        own = {n: v for n, v in checked.items() if n not in SETTINGS}
        return cls.from_run(RunSettings.from_values(run), **own)

    @classmethod
    def from_run(cls, run: RunSettings, **own: Any) -> NodeConfig:
        """The config of the run settings ``run`` and the node's own parameters ``own``."""
        return cls(deployment=run.deployment, config=run.config, detector=run.detector, **own)

    def class_set(self) -> frozenset[str] | None:
        """The ``classes`` filter as a set of class ids (None: keep every class)."""
        names = frozenset(c.strip() for c in self.classes.split(",") if c.strip())
        if len(names) > MAX_CLASSES:
            raise InputError(f"parameter classes: expected at most {MAX_CLASSES} class ids, got {len(names)}")
        return names or None

    @property
    def uses_detector(self) -> bool:
        """True when the node runs a person detector on each image (no detections subscription)."""
        return self.detector.detector is not None


def _ros_default(s: Setting) -> str | bool | int | float:
    """A setting's default as a ROS parameter value: None is the empty string, a path its text."""
    if s.default is None:
        if s.kind not in (str, Path):
            raise TypeError(f"setting {s.name}: a ROS parameter of type {s.kind.__name__} needs a default")
        return ""
    return str(s.default) if isinstance(s.default, Path) else s.default


def _checked(p: Parameter, value: Any) -> Any:
    """``value`` of parameter ``p`` when its type is the parameter's (an int for a double taken as a float)
    and a number within the setting's bounds, a string within :data:`MAX_TEXT` characters and one of its
    choices; the empty string of a setting that takes None (no detector, the bundled model) as None."""
    kind = type(p.default)
    if kind is float and type(value) is int:  # a YAML "1" for a double: what was meant is clear
        value = float(value)
    elif type(value) is not kind:
        article = "an" if p.type_name == "integer" else "a"
        raise InputError(f"parameter {p.name}: expected {article} {p.type_name}, got {value!r}")
    if kind is str:
        if len(value) > MAX_TEXT:
            raise InputError(f"parameter {p.name}: expected at most {MAX_TEXT} characters, got {len(value)}")
        if p.setting.choices and p.setting.owner is NodeConfig and value not in p.setting.choices:
            raise InputError(
                f"parameter {p.name}: expected one of {', '.join(p.setting.choices)}, got {value!r}"
            )
        if p.setting.optional and not value.strip():
            return None
    p.setting.check_bounds(value, f"parameter {p.name}")
    return value


#: Every parameter of the node, in the order of the YAML file and the docs.
PARAMETERS: tuple[Parameter, ...] = tuple(
    Parameter(s.name, _ros_default(s), s.help, s) for s in declared(NodeConfig) if s.ros
)

_BY_NAME: Mapping[str, Parameter] = {p.name: p for p in PARAMETERS}


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
