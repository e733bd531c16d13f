"""The run settings: every setting a deployed pipeline is run with, each declared once on its own field.

:data:`SETTINGS` reads them off the three values a run is made of (:class:`RunSettings`): the
:class:`~pairedge.runtime.deployment.Deployment` (model, precision, backend, flow, dla_core), the
:class:`~pairedge.runtime.config.PipelineConfig` with its nested ``FlowConfig`` and ``TrackerConfig``
(tracking, tracker, max_people, confirm_s, operating_point, box_shape, pair_radius, flow_preset, flow_scale,
coast_frames) and the :class:`~pairedge.runtime.detectors.config.DetectorConfig` (detector,
detector_backend, detector_layout). The CLI's options (``pairedge.apps.cli.settings``), the ROS node's
parameters and YAML file (``pairedge.apps.ros.node_params``) and the settings table of ``docs/runtime.md``
(:func:`markdown_table`) are generated from it.

>>> from pairedge.runtime.settings import RunSettings
>>> run = RunSettings.from_values({"precision": "int8", "max_people": 40, "coast_frames": 0})
>>> run.deployment.precision, run.config.max_people, run.config.tracker_config.coast_frames
('int8', 40, 0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from pairedge.core.errors import InputError
from pairedge.core.settings import Setting, declared, replace_path
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.deployment import Deployment
from pairedge.runtime.detectors.config import DetectorConfig

S = TypeVar("S", bound="RunSettings")


@dataclass(frozen=True)
class RunSettings:
    """The values a run is configured by: what is deployed, how the pipeline runs, which detector finds the
    people (when no boxes are given)."""

    deployment: Deployment = field(default_factory=Deployment)
    config: PipelineConfig = field(default_factory=PipelineConfig)
    detector: DetectorConfig = field(default_factory=DetectorConfig)

    @classmethod
    def from_values(cls: type[S], values: Mapping[str, Any], base: S | None = None) -> S:
        """``base`` (default: every setting at its default) with the settings of ``values`` (setting name ->
        value) applied, each owning dataclass made once with every value it gets (its checks run).

        Raises:
            InputError: an unknown setting name, a number out of its bounds, or a bad value.
        """
        unknown = sorted(set(values) - set(SETTINGS))
        if unknown:
            raise InputError(
                f"unknown setting(s) {', '.join(unknown)}; expected one of {', '.join(SETTINGS)}"
            )
        for name, value in values.items():
            SETTINGS[name].check_bounds(value)
        if base is None:
            deployment = {n: v for n, v in values.items() if SETTINGS[n].path[0] == "deployment"}
            base = cls(deployment=Deployment(**{SETTINGS[n].path[1]: v for n, v in deployment.items()}))
            values = {n: v for n, v in values.items() if n not in deployment}
        return replace_path(base, {SETTINGS[n].path: v for n, v in values.items()})

    def with_settings(self: S, **values: Any) -> S:
        """This value with the settings of ``values`` (setting name -> value) applied, e.g.
        ``RunOptions(video=False).with_settings(tracker="botsort", max_people=40)``.

        Raises:
            InputError: as :meth:`from_values`.
        """
        return type(self).from_values(values, self)

    def pipeline_config(self, detector: bool = False) -> PipelineConfig:
        """:attr:`config`; ``detector``: the boxes come from a pairedge detector, which already suppressed its
        duplicates, so the built-in tracker keeps overlapping people (``TrackerConfig.nms_iou`` None)."""
        if not detector:
            return self.config
        return replace_path(self.config, {("tracker_config", "nms_iou"): None})

    def values(self) -> dict[str, Any]:
        """Every setting's value (setting name -> value), the inverse of :meth:`from_values`."""
        out = {}
        for s in SETTINGS.values():
            obj: Any = self
            for part in s.path:
                obj = getattr(obj, part)
            out[s.name] = obj
        return out


#: Every run setting by name, in the order of the help and the docs.
SETTINGS: Mapping[str, Setting] = MappingProxyType(
    {
        s.name: s
        for s in (
            *declared(Deployment, ("deployment",)),
            *declared(PipelineConfig, ("config",)),
            *declared(DetectorConfig, ("detector",)),
        )
    }
)


def default_text(s: Setting) -> str:
    """A setting's default as the docs show it (None: its help says what it means)."""
    return "-" if s.default is None else f"`{s.default}`"


def markdown_table() -> str:
    """The run settings table of ``docs/runtime.md``: setting, CLI option, default, choices, what it does."""
    rows = ["| setting | option | default | choices | what it does |", "|---|---|---|---|---|"]
    for s in SETTINGS.values():
        choices = ", ".join(s.choices) if s.choices else "-"
        text = s.help.replace("|", "\\|")
        rows.append(f"| `{s.name}` | `{s.flag}` | {default_text(s)} | {choices} | {text} |")
    return "\n".join(rows) + "\n"
