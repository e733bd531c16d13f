"""Where the run settings are declared in a source tree: a static count, so a checkout of any commit can be
counted the same way (``python tests/helpers/settings_census.py [ROOT]`` prints it).

A declaration of setting ``name`` (e.g. ``flow_preset``, the field ``preset`` of ``FlowConfig``) is:

* a field named ``name`` with a default in a configuration dataclass (a class named ``*Options``,
  ``*Config``, ``*Settings``, ``*Task`` or ``Deployment``: ``RunOptions.flow_preset = None``), or the owner's
  own field (``FlowConfig.preset``); records that report a value (manifests, summaries) are no declaration,
  nor a field that holds a nested configuration (``flow: FlowConfig``);
* a ``typer.Option(...)`` whose flags include ``--flow-preset``;
* a ROS parameter entry ``Parameter("flow_preset", ...)``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

#: The run settings and the (class, field) that declares each one where the field has another name.
SETTINGS = (
    "model",
    "precision",
    "backend",
    "flow",
    "dla_core",
    "confirm_s",
    "operating_point",
    "tracking",
    "tracker",
    "coast_frames",
    "flow_preset",
    "flow_scale",
    "max_people",
    "box_shape",
    "pair_radius",
    "detector",
    "detector_backend",
    "detector_layout",
)
OWNER_FIELDS = {
    "flow_preset": ("FlowConfig", "preset"),
    "flow_scale": ("FlowConfig", "scale"),
    "coast_frames": ("TrackerConfig", "coast_frames"),
    "detector_backend": ("DetectorConfig", "backend"),
    "detector_layout": ("DetectorConfig", "layout"),
}
#: The folders of the package (the pyproject's package-dir).
FOLDERS = ("sdk", "export", "runtime", "calibration")


#: Names of the classes whose fields are configuration (what a user sets), not records of what ran.
CONFIG_SUFFIXES = ("Options", "Config", "Settings", "Task")


def _is_config(node: ast.ClassDef) -> bool:
    return node.name == "Deployment" or node.name.endswith(CONFIG_SUFFIXES)


def _is_dataclass(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False


def _strings(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def declarations(root: Path, names: Iterable[str] = SETTINGS) -> dict[str, list[str]]:
    """Setting name -> its declaration sites (``path:line kind``) under ``root``'s package folders."""
    names = tuple(names)
    flags = {"--" + n.replace("_", "-"): n for n in names}
    out: dict[str, list[str]] = {n: [] for n in names}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            rel = path.relative_to(root)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and _is_dataclass(node) and _is_config(node):
                    owned = {f: n for n, (c, f) in OWNER_FIELDS.items() if c == node.name}
                    for item in node.body:
                        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                            continue
                        nested = isinstance(item.annotation, ast.Name) and item.annotation.id[:1].isupper()
                        if item.value is None or nested:
                            continue
                        field_name = item.target.id
                        n = owned.get(field_name, field_name)
                        if n in out:
                            out[n].append(f"{rel}:{item.lineno} field {node.name}.{field_name}")
                elif isinstance(node, ast.Call):
                    func = node.func
                    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    strings = _strings(node)
                    if called == "Option":
                        for s in strings:
                            if s in flags:
                                out[flags[s]].append(f"{rel}:{node.lineno} option {s}")
                    elif called == "Parameter" and strings and strings[0] in out:
                        out[strings[0]].append(f"{rel}:{node.lineno} ros parameter")
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[2]
    found = declarations(root)
    for name, sites in found.items():
        print(f"{name}: {len(sites)}")
        for site in sites:
            print(f"    {site}")
    print(f"total: {sum(len(s) for s in found.values())} declarations of {len(found)} settings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
