"""OpenCV DIS optical flow (Kroeger et al., ECCV 2016): the default CPU flow backend."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.core.errors import InputError
from pairedge.runtime.flow.base import FlowBackend, FlowOptions

PRESETS: dict[str, int] = {
    "ultrafast": cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST,
    "fast": cv2.DISOPTICAL_FLOW_PRESET_FAST,
    "medium": cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
}


class DISFlow(FlowBackend):
    """Dense Inverse Search flow.

    Args:
        options: :class:`DISFlow.Options`, or None and its fields as keywords.

    The output buffer is zeroed before every call: OpenCV's DIS uses a non-empty output argument as its
    initial flow, and zeroing keeps each result a function of the two frames alone.
    """

    @dataclass(frozen=True, kw_only=True)
    class Options(FlowOptions):
        """DIS options.

        Attributes:
            preset: "ultrafast", "fast" (default) or "medium" (OpenCV's presets; medium is the most accurate,
                about 4x slower than fast).
            scale: resize factor in (0, 1] applied before the flow is computed (0.5 halves width and height).
        """

        preset: str = "fast"
        scale: float = 0.5

        def __post_init__(self) -> None:
            super().__post_init__()
            if self.preset not in PRESETS:
                raise InputError(f"DIS flow preset: expected one of {sorted(PRESETS)}, got {self.preset!r}")

    name = "dis"
    min_side = 12  # OpenCV's DIS raises "Incorrect size of input array" below (checked 12..3000 px)
    options: DISFlow.Options

    def __init__(
        self, options: DISFlow.Options | None = None, *, preset: str | None = None, scale: float | None = None
    ) -> None:
        super().__init__(options, preset=preset, scale=scale)
        self.preset = self.options.preset
        self._dis = cv2.DISOpticalFlow.create(PRESETS[self.preset])

    @classmethod
    def options_for(cls, scale: float, preset: str | None = None) -> DISFlow.Options:
        """The options of a pipeline's flow settings: ``scale`` and ``preset`` (None: "fast")."""
        return cls.Options(scale=scale, preset=preset or "fast")

    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        result = self._dis.calc(prev_small, small, out)
        if result is not out:  # OpenCV reallocated (should not happen with a matching buffer)
            np.copyto(out, result)

    def __repr__(self) -> str:
        return f"DISFlow(preset={self.preset!r}, scale={self.scale})"
