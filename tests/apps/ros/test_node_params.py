"""The node's one parameter table (pairedge.apps.ros.node_params): read off the run settings the node shares
with ``pairedge run`` and NodeConfig's own fields, and every bad value is refused with a one-line error that
names the parameter."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pairedge.apps.ros.node_params import PARAMETERS, NodeConfig, markdown_table, render_yaml, yaml_scalar
from pairedge.core.errors import InputError
from pairedge.runtime.settings import SETTINGS, RunSettings


def test_the_table_is_the_run_settings_and_the_node_fields() -> None:
    run = [p.name for p in PARAMETERS if p.name in SETTINGS]
    assert run == [s.name for s in SETTINGS.values() if s.ros]
    own = [
        f.name for f in dataclasses.fields(NodeConfig) if f.name not in {"deployment", "config", "detector"}
    ]
    assert [p.name for p in PARAMETERS if p.name not in SETTINGS] == own
    for p in PARAMETERS:  # the default of each parameter is its setting's (None: the empty string)
        default = p.setting.default
        assert p.default == (
            "" if default is None else str(default) if isinstance(default, Path) else default
        )
    assert len({p.name for p in PARAMETERS}) == len(PARAMETERS)
    assert all(p.description and "\n" not in p.description for p in PARAMETERS)
    default = NodeConfig()
    assert default.class_set() is None and default.uses_detector  # the bundled detector by default
    assert NodeConfig.from_values({}) == default
    # the node's run settings are the library's: the same defaults as pairedge run and RunSettings
    assert RunSettings.from_values({}).values() == {n: v for n, v in default.values().items()}
    assert NodeConfig.from_values({"detector": ""}).uses_detector is False
    assert NodeConfig.from_values({"model": ""}).deployment.model == "default"


def test_values_are_checked() -> None:
    cfg = NodeConfig.from_values(
        {"classes": " person, 1 ,,", "stamp_tolerance": 0, "detector": "hog", "tracker": " BoTSORT"}
    )
    assert cfg.config.tracker == "botsort"  # the runtime's registry judges and spells the name
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
