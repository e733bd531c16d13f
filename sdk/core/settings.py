"""Settings declared once, on the dataclass field that holds them.

A setting is a field of a frozen configuration dataclass (``Deployment.precision``,
``PipelineConfig.max_people``, ``FlowConfig.preset``, ...) whose metadata says how users name and read it::

    max_people: int | None = field(default=100, metadata=setting("At most this many ...", low=2))

The field's name (or ``name=``), annotation and default are the setting's name, type and default; the
metadata adds its help, its choices and bounds. Everything that shows a setting to a user -- every CLI
command's options, the ROS node's parameters, the YAML parameter file, the docs tables -- is generated from
the :class:`Setting` records :func:`declared` reads off the fields (``pairedge.runtime.settings`` lists the
run settings), so no default, choice or help text is typed a second time.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import NoneType, UnionType
from typing import Any

from pairedge.core.errors import InputError

#: The field-metadata key of a setting's :class:`SettingInfo`.
SETTING_KEY = "pairedge.setting"

#: Value types a setting may have (what a command line, a ROS parameter and YAML can all write).
KINDS: tuple[type, ...] = (bool, int, float, str, Path)


@dataclass(frozen=True)
class SettingInfo:
    """What a field's metadata adds to its name, type and default (see :func:`setting`)."""

    help: str
    name: str | None = None
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    low: float | None = None
    high: float | None = None
    kind: type | None = None
    ros: bool = False


def setting(
    help: str,
    *,
    name: str | None = None,
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = (),
    low: float | None = None,
    high: float | None = None,
    kind: type | None = None,
    ros: bool = False,
) -> dict[str, SettingInfo]:
    """Field metadata that makes a dataclass field a user-facing setting.

    Args:
        help: one or two sentences for ``--help``, the ROS parameter description and the docs.
        name: the setting's name when it is not the field's (``FlowConfig.preset`` is ``flow_preset``).
        choices: the accepted names (a callable when they come from a registry filled later); shown in the
            help, not enforced here: the owning dataclass checks its values with its own message.
        low, high: inclusive bounds of a number (the CLI's ``min`` / ``max``, the ROS node's range check).
        kind: the value type when the annotation names several (``str | Path``: the first of :data:`KINDS`).
        ros: the ROS node has this setting as a parameter.
    """
    info = SettingInfo(help, name, choices, low, high, kind, ros)
    return {SETTING_KEY: info}


@dataclass(frozen=True)
class Setting:
    """One setting as read off its field.

    Attributes:
        name: its one name: ``--name-with-dashes`` on the command line, the ROS parameter, the YAML key.
        path: attribute names from the root object to the field (``("config", "flow", "preset")``).
        owner: the dataclass that declares the field.
        help: see :func:`setting`.
        default: the field's default.
        kind: the value type (one of :data:`KINDS`).
        optional: the field accepts None (its default may be None: "the model's", "every pair", ...).
        choices, low, high, ros: see :func:`setting`.
    """

    name: str
    path: tuple[str, ...]
    owner: type
    help: str
    default: Any
    kind: type
    optional: bool
    choices: tuple[str, ...]
    low: float | None
    high: float | None
    ros: bool

    @property
    def flag(self) -> str:
        """The command-line option: ``--max-people``."""
        return "--" + self.name.replace("_", "-")

    def check_bounds(self, value: Any, where: str = "") -> None:
        """Raise :class:`InputError` naming ``where`` (default: the setting) when ``value`` is a number
        outside ``[low, high]`` (or not finite)."""
        if self.low is None and self.high is None or value is None or isinstance(value, bool | str):
            return
        low = -math.inf if self.low is None else self.low
        high = math.inf if self.high is None else self.high
        if not (math.isfinite(value) and low <= value <= high):
            raise InputError(f"{where or self.name}: expected a number in [{low:g}, {high:g}], got {value}")


def _kind(annotation: Any, info: SettingInfo) -> tuple[type, bool]:
    """The value type and whether None is accepted, from a resolved annotation."""
    args = typing.get_args(annotation) if isinstance(annotation, UnionType) else (annotation,)
    optional = NoneType in args
    if info.kind is not None:
        return info.kind, optional
    for kind in KINDS:
        if kind in args:
            return kind, optional
    raise TypeError(f"a setting's annotation must name one of {KINDS}, got {annotation!r}")


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"setting {f.name!r} has no default")


def declared(cls: type, path: tuple[str, ...] = ()) -> list[Setting]:
    """The settings declared on ``cls`` and, recursively, on the dataclass fields it nests (a
    ``PipelineConfig``'s ``flow: FlowConfig``), each with its path from ``cls`` prefixed by ``path``."""
    hints = typing.get_type_hints(cls)
    out: list[Setting] = []
    for f in dataclasses.fields(cls):
        info = f.metadata.get(SETTING_KEY)
        hint = hints[f.name]
        if info is None:
            if isinstance(hint, type) and dataclasses.is_dataclass(hint):
                out.extend(declared(hint, (*path, f.name)))
            continue
        kind, optional = _kind(hint, info)
        choices = info.choices() if callable(info.choices) else info.choices
        out.append(
            Setting(
                name=info.name or f.name,
                path=(*path, f.name),
                owner=cls,
                help=info.help,
                default=_default(f),
                kind=kind,
                optional=optional,
                choices=tuple(choices),
                low=info.low,
                high=info.high,
                ros=info.ros,
            )
        )
    return out


def replace_path(root: Any, values: Mapping[tuple[str, ...], Any]) -> Any:
    """``root`` (a frozen dataclass) with the field at each path of ``values`` replaced, nested dataclasses
    rebuilt with :func:`dataclasses.replace` (so their checks run again)."""
    direct = {p[0]: v for p, v in values.items() if len(p) == 1}
    nested: dict[str, dict[tuple[str, ...], Any]] = {}
    for p, v in values.items():
        if len(p) > 1:
            nested.setdefault(p[0], {})[p[1:]] = v
    for name, inner in nested.items():
        direct[name] = replace_path(getattr(root, name), inner)
    return dataclasses.replace(root, **direct) if direct else root
