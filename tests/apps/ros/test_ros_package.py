"""The ament_python package ros2/pairedge_ros, checked without ROS: package.xml against the format-3 rules
(REP 149), setup.py / setup.cfg as colcon and ``ros2 run`` need them, the launch file's node, remaps and
parameter file (parsed with ast), the YAML equal to the node's parameter table, and docs/ros2.md's table."""

from __future__ import annotations

import ast
import importlib.util
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pairedge.apps.ros.node_params import PARAMETERS, markdown_table, render_yaml

ROOT = Path(__file__).resolve().parents[3]
PKG = ROOT / "ros2" / "pairedge_ros"
NAME = "pairedge_ros"

#: REP 149 (package format 3): the elements of <package>, in the order its schema's xs:sequence gives
#: (the dependency elements may come in any order among themselves), with how often each may occur.
ORDER: tuple[tuple[tuple[str, ...], int, int | None], ...] = (
    (("name",), 1, 1),
    (("version",), 1, 1),
    (("description",), 1, 1),
    (("maintainer",), 1, None),
    (("license",), 1, None),
    (("url",), 0, None),
    (("author",), 0, None),
    (
        (
            "build_depend",
            "build_export_depend",
            "buildtool_depend",
            "buildtool_export_depend",
            "exec_depend",
            "depend",
            "doc_depend",
            "test_depend",
            "conflict",
            "replace",
            "group_depend",
            "member_of_group",
        ),
        0,
        None,
    ),
    (("export",), 0, 1),
)
REQUIRED_RUN_DEPENDS = {
    "rclpy",
    "sensor_msgs",
    "vision_msgs",
    "visualization_msgs",
    "std_msgs",
    "diagnostic_msgs",
}


def check_format3(root: ET.Element) -> list[str]:
    """What breaks REP 149's format-3 rules in a parsed package.xml (empty: valid)."""
    problems = []
    if root.tag != "package" or root.get("format") != "3":
        problems.append(f'root must be <package format="3">, got <{root.tag} format={root.get("format")!r}>')
    rank = {tag: k for k, (tags, _, _) in enumerate(ORDER) for tag in tags}
    last = 0
    counts = [0] * len(ORDER)
    for child in root:
        if child.tag not in rank:
            problems.append(f"<{child.tag}> is not a format-3 element")
            continue
        if rank[child.tag] < last:
            problems.append(
                f"<{child.tag}> comes after <{ORDER[last][0][0]}>; REP 149 orders them the other way"
            )
        last = max(last, rank[child.tag])
        counts[rank[child.tag]] += 1
    for (tags, low, high), n in zip(ORDER, counts, strict=True):
        if n < low or (high is not None and n > high):
            problems.append(f"<{tags[0]}> occurs {n} times; expected {low}..{high or 'n'}")
    name = root.findtext("name", "")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        problems.append(
            f"package name {name!r}: expected lower case letters, digits and underscores (REP 144)"
        )
    if not re.fullmatch(r"\d+\.\d+\.\d+", root.findtext("version", "")):
        problems.append("version: expected MAJOR.MINOR.PATCH")
    for person in root.findall("maintainer"):
        if not person.get("email") or not (person.text or "").strip():
            problems.append("<maintainer> needs a name and an email attribute")
    for dep in root:
        if dep.tag.endswith("depend") and not (dep.text or "").strip():
            problems.append(f"<{dep.tag}> is empty")
    return problems


@pytest.fixture(scope="module")
def package_xml() -> ET.Element:
    return ET.parse(PKG / "package.xml").getroot()


def _setup_call() -> dict[str, ast.expr]:
    tree = ast.parse((PKG / "setup.py").read_text("utf-8"))
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"]
    return {kw.arg: kw.value for kw in call.keywords if kw.arg}


def _value(node: ast.expr, names: dict[str, Any]) -> Any:
    """A literal of setup.py, with f-strings over its module-level constants resolved."""
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(_value(v.value, names)) if isinstance(v, ast.FormattedValue) else v.value for v in node.values
        )
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.Call):  # glob("launch/*.launch.py")
        return ("glob", ast.literal_eval(node.args[0]))
    if isinstance(node, ast.List | ast.Tuple):
        return [_value(v, names) for v in node.elts]
    if isinstance(node, ast.Dict):
        return {_value(k, names): _value(v, names) for k, v in zip(node.keys, node.values, strict=True) if k}
    return ast.literal_eval(node)


def test_package_xml_is_format_3(package_xml: ET.Element) -> None:
    assert check_format3(package_xml) == []
    text = (PKG / "package.xml").read_text("utf-8")
    assert "package_format3.xsd" in text.splitlines()[1]  # the xml-model hint editors and catkin_lint use
    assert package_xml.findtext("name") == NAME


def test_package_xml_dependencies_and_build_type(package_xml: ET.Element) -> None:
    run = {d.text for d in package_xml if d.tag in ("exec_depend", "depend")}
    assert REQUIRED_RUN_DEPENDS <= run and {"launch", "launch_ros"} <= run
    assert [d.text for d in package_xml.findall("buildtool_depend")] == ["ament_python"]
    assert [e.text for e in package_xml.findall("export/build_type")] == ["ament_python"]


def test_the_checker_rejects_what_rep_149_rejects() -> None:
    bad = ET.fromstring(
        '<package format="2"><version>1.0</version><name>Pairedge</name><foo/>'
        "<export/><exec_depend/></package>"
    )
    problems = " | ".join(check_format3(bad))
    for part in (
        'format="3"',
        "<name> comes after <version>",
        "<foo> is not",
        "<exec_depend> comes after",
        "<description> occurs 0",
        "<maintainer> occurs 0",
        "REP 144",
        "MAJOR.MINOR",
        "is empty",
    ):
        assert part in problems


def test_setup_py_installs_what_colcon_and_ros2_need(package_xml: ET.Element) -> None:
    names = {"PACKAGE": NAME}
    kwargs = {k: _value(v, names) for k, v in _setup_call().items()}
    assert kwargs["name"] == NAME and kwargs["packages"] == [NAME]
    assert kwargs["version"] == package_xml.findtext("version")
    assert kwargs["license"] == package_xml.findtext("license")
    data = dict((dest, src) for dest, src in kwargs["data_files"])
    assert data["share/ament_index/resource_index/packages"] == [f"resource/{NAME}"]
    assert data[f"share/{NAME}"] == ["package.xml"]
    assert data[f"share/{NAME}/launch"] == ("glob", "launch/*.launch.py")
    assert data[f"share/{NAME}/config"] == ("glob", "config/*.yaml")
    assert kwargs["entry_points"] == {"console_scripts": [f"pairedge_node = {NAME}.node:main"]}
    assert (PKG / "resource" / NAME).is_file() and (PKG / NAME / "__init__.py").is_file()
    cfg = (PKG / "setup.cfg").read_text("utf-8")
    assert (
        f"script_dir=$base/lib/{NAME}" in cfg and f"install_scripts=$base/lib/{NAME}" in cfg
    )  # ros2 run looks there


def test_entry_point_starts_pairedges_node(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rosbags")
    import fake_rclpy

    fake = fake_rclpy.install(monkeypatch)
    monkeypatch.setattr(fake_rclpy.FakeNode, "OVERRIDES", {"flow": "none", "backend": "ort-cpu"})
    spec = importlib.util.spec_from_file_location("pairedge_ros_node", PKG / NAME / "node.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--ros-args"])
    (node,) = fake.nodes
    assert type(node).__name__ == "PairedgeNode" and node.destroyed and fake.shutdown == [True]


def _launch_node_call() -> tuple[ast.Call, ast.Module]:
    tree = ast.parse((PKG / "launch" / "pairedge.launch.py").read_text("utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Node"]
    assert len(calls) == 1
    return calls[0], tree


def _launch_config(node: ast.expr) -> str:
    assert isinstance(node, ast.Call) and getattr(node.func, "id", "") == "LaunchConfiguration", ast.dump(
        node
    )
    return ast.literal_eval(node.args[0])


def test_launch_file_starts_the_node_with_remaps_and_the_parameter_file() -> None:
    from pairedge.apps.ros.node import NODE_NAME

    call, tree = _launch_node_call()
    kw = {k.arg: k.value for k in call.keywords}
    assert ast.literal_eval(kw["package"]) == NAME and ast.literal_eval(kw["executable"]) == "pairedge_node"
    assert ast.literal_eval(kw["name"]) == NODE_NAME
    remaps = {ast.literal_eval(pair.elts[0]): _launch_config(pair.elts[1]) for pair in kw["remappings"].elts}
    defaults = {p.name: p.default for p in PARAMETERS}
    assert remaps == {
        defaults["image_topic"]: "camera_topic",
        defaults["detections_topic"]: "detections_topic",
    }
    assert [_launch_config(p) for p in kw["parameters"].elts] == ["params_file"]
    declared = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DeclareLaunchArgument":
            declared[ast.literal_eval(n.args[0])] = {k.arg: k.value for k in n.keywords}
    assert set(declared) == {"camera_topic", "detections_topic", "params_file"}
    assert all("description" in d for d in declared.values())
    assert ast.literal_eval(declared["camera_topic"]["default_value"]) == "/camera/image_raw"
    # the parameter file's default: <share of pairedge_ros>/config/pairedge.yaml, which setup.py installs
    default = declared["params_file"]["default_value"]
    assert isinstance(default, ast.Name)
    (assign,) = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and n.targets[0].id == default.id]
    parts = assign.value.args[0].elts
    assert ast.unparse(parts[0]) == f"FindPackageShare('{NAME}')"
    assert [ast.literal_eval(p) for p in parts[1:]] == ["config", "pairedge.yaml"]
    assert (PKG / "config" / "pairedge.yaml").is_file()


def test_yaml_is_the_parameter_table() -> None:
    text = (PKG / "config" / "pairedge.yaml").read_text("utf-8")
    assert text == render_yaml(), (
        "regenerate: python -c 'from pairedge.apps.ros.node_params import render_yaml; print(render_yaml(), "
        'end="")\' > ros2/pairedge_ros/config/pairedge.yaml'
    )
    yaml = pytest.importorskip("yaml")
    loaded = yaml.safe_load(text)
    params = loaded["/**"]["ros__parameters"]  # any node name and namespace
    assert list(loaded) == ["/**"] and list(params) == [p.name for p in PARAMETERS]
    for p in PARAMETERS:
        assert params[p.name] == p.default and type(params[p.name]) is type(p.default), p.name


def test_docs_carry_the_parameter_table() -> None:
    doc = (ROOT / "docs" / "ros2.md").read_text("utf-8")
    assert markdown_table() in doc
    for command in (
        "colcon build --packages-select pairedge_ros",
        "ros2 launch pairedge_ros pairedge.launch.py",
        "source install/setup.bash",
    ):
        assert command in doc
