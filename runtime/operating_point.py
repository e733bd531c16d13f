"""Which gate threshold and confirmation time a stream runs under: the operating-point policy.

A model carries a main operating point (``p_interact``, ``confirm_s``) and may carry named ones (the bundled
model's ``surveillance``); some of those give a ``min_camera_height``. ``PipelineConfig.operating_point``
picks one by name, or "auto" (the default): the main point until the camera is estimated to be high enough
for an elevated-camera point (:class:`~pairedge.runtime.viewpoint.AutoOperatingPoint`), switching back and
forth as the estimate moves. Explicit ``tau_interact`` / ``confirm_s`` in the config always win. An exact
replay gives the thresholds of each frame instead (:meth:`OperatingPointPolicy.give`).
"""

from __future__ import annotations

import numpy as np
from pairedge.runtime.config import PipelineConfig
from pairedge.runtime.loading import ModelPair
from pairedge.runtime.viewpoint import AutoOperatingPoint, SwitchLog


class OperatingPointPolicy:
    """The thresholds in force for one stream, and their automatic switches.

    Args:
        models: the pipeline's models (their main and named operating points).
        config: ``operating_point`` (None: "auto"), and ``tau_interact`` / ``confirm_s`` that override.

    Attributes:
        name: the configured point ("default", a model's point name, or "auto" when the model has points to
            switch to; "auto" without such points reads "default").
        tau_interact: the stage-1 gate threshold in force. confirm_s: the link confirmation time, seconds.
        switches: the automatic changes since load (:class:`~pairedge.runtime.viewpoint.SwitchLog`).

    Raises:
        ModelError: an unknown point name or malformed point values (from the model).
    """

    def __init__(self, models: ModelPair, config: PipelineConfig) -> None:
        self._config = config
        main = {"p_interact": models.threshold("p_interact"), "confirm_s": models.confirm_seconds()}
        name = config.operating_point or "auto"
        point = models.operating_point(name) if name not in ("auto", "default") else main
        auto_points = models.auto_operating_points() if name == "auto" else {}
        self.auto = AutoOperatingPoint(main, auto_points) if auto_points else None
        self.name = name if self.auto is not None or name != "auto" else "default"
        self.tau_interact = config.tau_interact if config.tau_interact is not None else point["p_interact"]
        self.confirm_s = config.confirm_s if config.confirm_s is not None else point["confirm_s"]
        self.switches = SwitchLog(self.current)

    @property
    def current(self) -> str | None:
        """The automatic point in force ("default" or a point name), None when nothing switches."""
        return self.auto.name if self.auto is not None else None

    def observe(self, boxes: np.ndarray, image_size: tuple[int, int] | None) -> str | None:
        """Refresh the camera-height estimate with a frame's (N, 4) ``x y w h`` detector boxes; the
        diagnostics note when the point switched (its thresholds then hold from this frame on), else None."""
        if self.auto is None:
            return None
        note = self.auto.observe(boxes, image_size)
        if note is not None:
            self._apply(self.auto.current)
        return note

    def give(self, tau_interact: float, confirm_s: float) -> None:
        """A replay's frame: the recorded thresholds instead of deciding (they stay until changed)."""
        self.tau_interact, self.confirm_s = float(tau_interact), float(confirm_s)

    def record(self, frame: int) -> None:
        """Log the point in force at ``frame`` (a record when it changed; see :class:`SwitchLog`)."""
        self.switches.record(frame, self.current, self.tau_interact, self.confirm_s)

    def reset(self) -> None:
        """A new stream: the automatic point forgets the camera and goes back to the main point."""
        if self.auto is not None:
            self.auto.reset()
            self._apply(self.auto.current)

    def describe(self) -> str:
        """The configured point, and the automatic one in force: ``"auto (now surveillance)"``."""
        return self.name + (f" (now {self.auto.name})" if self.auto is not None else "")

    def describe_start(self) -> str:
        """:meth:`describe` for a header written before the stream: an automatic point said as where it
        starts and how its switches are recorded."""
        if self.auto is None:
            return self.describe()
        return (
            f"auto (starts at {self.auto.name}; a frame record with an 'operating_point' key marks each "
            "switch and the thresholds from that frame on)"
        )

    def _apply(self, point: dict[str, float]) -> None:
        """Use an operating point's threshold and confirmation time (explicit config values still win)."""
        cfg = self._config
        self.tau_interact = cfg.tau_interact if cfg.tau_interact is not None else float(point["p_interact"])
        self.confirm_s = cfg.confirm_s if cfg.confirm_s is not None else float(point["confirm_s"])
