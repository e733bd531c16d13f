"""The node's one parameter table (pairedge.apps.ros.node_params): NodeConfig has exactly its fields and
defaults, and every bad value is refused with a one-line error that names the parameter."""

from __future__ import annotations

import dataclasses

import pytest
from pairedge.apps.ros.node_params import PARAMETERS, NodeConfig, markdown_table, render_yaml, yaml_scalar
from pairedge.core.errors import InputError


def test_config_fields_are_the_table() -> None:
    fields = dataclasses.fields(NodeConfig)
    assert [f.name for f in fields] == [p.name for p in PARAMETERS]
    assert [f.default for f in fields] == [p.default for p in PARAMETERS]
    assert all(type(f.default) is type(p.default) for f, p in zip(fields, PARAMETERS, strict=True))
    assert len({p.name for p in PARAMETERS}) == len(PARAMETERS)
    assert all(p.description and "\n" not in p.description for p in PARAMETERS)
    default = NodeConfig()
    assert default.class_set() is None and default.uses_detector  # the bundled detector by default


def test_values_are_checked() -> None:
    cfg = NodeConfig.from_values(
        {"classes": " person, 1 ,,", "stamp_tolerance": 0, "detector": "hog", "tracker": " BoTSORT"}
    )
    assert cfg.tracker == "botsort"  # the runtime's registry judges and spells the name
    assert cfg.class_set() == frozenset({"person", "1"}) and cfg.uses_detector
    assert cfg.stamp_tolerance == 0.0 and type(cfg.stamp_tolerance) is float  # an int for a double is taken
    bad = {
        "qos": ("best_effort", "parameter qos: expected one of sensor_data, reliable, got 'best_effort'"),
        "tracker": (
            "sort",
            "parameter tracker: tracker backend: expected one of iou, bytetrack, ocsort, botsort, got 'sort'",
        ),
        "tracking": ("sometimes", "parameter tracking: expected one of auto, always, never"),
        "stamp_tolerance": (-0.1, r"parameter stamp_tolerance: expected a number in \[0, 10\], got -0.1"),
        "max_people": (1, r"parameter max_people: expected a number in \[2, 100000\], got 1"),
        "qos_depth": (0, "parameter qos_depth"),
        "pairing_queue": (10**6, "parameter pairing_queue"),
        "diagnostics_period": (float("nan"), "parameter diagnostics_period"),
        "compressed": ("yes", "parameter compressed: expected a bool, got 'yes'"),
        "max_people_": (3, "unknown parameter"),
        "image_topic": ("  ", "parameter image_topic: expected a topic"),
        "model": ("x" * 5000, "parameter model: expected at most 4096 characters"),
        "classes": (",".join(str(k) for k in range(1001)), "expected at most 1000 class ids"),
        "output_depth": (True, "parameter output_depth: expected an integer, got True"),
    }
    for name, (value, message) in bad.items():
        with pytest.raises(InputError, match=message):
            NodeConfig.from_values({name: value})


def test_yaml_and_markdown_renderings() -> None:
    assert (
        yaml_scalar('a "b"\\') == '"a \\"b\\"\\\\"'
        and yaml_scalar(False) == "false"
        and yaml_scalar(0.01) == "0.01"
    )
    text = render_yaml()
    assert text.count("\n    # ") == len(PARAMETERS)
    table = markdown_table().splitlines()
    assert len(table) == 2 + len(PARAMETERS) and all(row.count(" | ") == 3 for row in table[2:])
