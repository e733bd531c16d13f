"""Each run setting is declared once, on its field (``pairedge.runtime.settings``): every CLI command's
option, the ROS node's parameter, the YAML file and the docs tables are generated from it. A setting
declared, defaulted or described in a second place fails here."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import typer.main
from pairedge.apps.cli import app
from pairedge.apps.ros.node_params import PARAMETERS
from pairedge.runtime.settings import SETTINGS, markdown_table
from settings_census import FOLDERS, declarations

ROOT = Path(__file__).resolve().parents[2]

#: The fields beside a setting's own that take its value one layer down, and why they are no second place
#: to set it: each is filled from the setting by the layer above (the pipeline, the deployment, the build
#: command), and none repeats its default.
HANDED_DOWN = {
    "precision": {"BuildSettings.precision", "TensorRTOptions.precision"},
    "dla_core": {"BuildSettings.dla_core", "TensorRTOptions.dla_core", "TensorRTDetectorOptions.dla_core"},
}


def test_the_run_settings() -> None:
    assert len(SETTINGS) == 18
    for s in SETTINGS.values():
        assert s.help and "\n" not in s.help and s.help.endswith("."), s.name
        assert s.kind in (bool, int, float, str, Path)
        assert all(isinstance(c, str) for c in s.choices)
        assert s.default is None or s.optional or isinstance(s.default, s.kind | str), s.name


def test_each_setting_is_declared_once_in_the_package() -> None:
    """A static count over the package's sources (``tests/helpers/settings_census.py``): a setting's own
    field, and only the fields one layer down that are filled from it; no ``typer.Option`` and no ROS
    ``Parameter(...)`` entry of a setting anywhere."""
    found = declarations(ROOT, SETTINGS)
    for name, sites in found.items():
        kinds = [site.split(" ", 1)[1] for site in sites]
        owner = SETTINGS[name].owner.__name__ + "." + SETTINGS[name].path[-1]
        assert f"field {owner}" in kinds, (name, sites)
        others = {k.removeprefix("field ") for k in kinds if k != f"field {owner}"}
        assert others <= HANDED_DOWN.get(name, set()), (name, sites)
    total = sum(len(s) for s in found.values())
    assert total <= 25, total  # 92 before the settings were declared on their fields (commit 0a42dac)


def _commands() -> dict[str, Any]:
    """Every command (``"parity pack"``) of the CLI, as the click commands Typer built."""
    group = typer.main.get_command(app)
    out: dict[str, Any] = {}

    def walk(cmd: Any, path: str) -> None:
        if hasattr(cmd, "commands"):  # a group (Typer's click, which may not be the installed one)
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            out[path] = cmd

    walk(group, "")
    return out


def _choices(param: Any) -> list[str]:
    """The choices of a Typer option: its click type's (Typer < 0.20 and click) or its enum's (later)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        return [c.value for c in descriptor.annotation]
    return list(param.type.choices)


#: (command, setting) whose option has the command's own default, on purpose (the decorator says so).
OWN_DEFAULTS = {("parity pack", "backend"), ("build", "detector"), ("doctor", "model")}


def test_every_command_option_of_a_setting_is_generated_from_it() -> None:
    """Every option named like a run setting, in every command, has the setting's flag, help and default
    (or the command's own default, listed above); ``pairedge run`` has all 18."""
    seen = set()
    for path, cmd in _commands().items():
        for param in cmd.params:
            if param.name not in SETTINGS or param.param_type_name != "option":
                continue
            s = SETTINGS[param.name]
            seen.add((path, s.name))
            assert param.opts == [s.flag], (path, param.opts)
            assert param.help is not None and param.help.startswith(s.help.replace("[", "\\[")), (
                path,
                s.name,
            )
            default = getattr(param.default, "value", param.default)
            if (path, s.name) not in OWN_DEFAULTS:
                expected = str(s.default) if isinstance(s.default, Path) else s.default
                shown = str(default) if isinstance(default, Path) else default
                assert shown == expected, (path, s.name, default)
            if s.choices:  # an enum of exactly the setting's choices (Typer makes it a choice)
                assert _choices(param) == list(s.choices), (path, s.name)
    assert {n for p, n in seen if p == "run"} == set(SETTINGS)
    assert OWN_DEFAULTS <= seen


def test_ros_parameters_are_the_settings() -> None:
    for p in PARAMETERS:
        if p.name in SETTINGS:
            assert p.setting == SETTINGS[p.name] and p.description == SETTINGS[p.name].help


def test_help_texts_are_written_once() -> None:
    """The first line of each setting's help is a string literal in exactly one source file: its field."""
    starts = {s.name: s.help[:40] for s in SETTINGS.values()}
    where: dict[str, list[str]] = {n: [] for n in starts}
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for name, start in starts.items():
                        if node.value.startswith(start):
                            where[name].append(str(path.relative_to(ROOT)))
    assert all(len(files) == 1 for files in where.values()), where


def test_docs_table_is_generated() -> None:
    doc = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    assert markdown_table() in doc, (
        "regenerate the settings table of docs/runtime.md: "
        "python -c 'from pairedge.runtime.settings import markdown_table; print(markdown_table())'"
    )
