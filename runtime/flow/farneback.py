"""OpenCV Farneback flow with the exact parameters of the ``liang2026`` features (the paper's released
code)."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from pairedge.core.features.liang2026 import FARNEBACK_PARAMS, PilLuma
from pairedge.runtime.flow.base import FlowBackend, FlowOptions


class FarnebackFlow(FlowBackend):
    """Farneback dense flow (pyramid scale 0.5, 3 levels, window 15, 3 iterations, poly_n 5, poly_sigma 1.2).

    Args:
        options: :class:`FarnebackFlow.Options`, or None and its fields as keywords.

    Grayscale conversion (:meth:`to_gray`, called by :class:`~pairedge.runtime.flow.FlowStream`) is PIL's
    integer luma, bit-exact with the released code's ``Image.convert("L")`` and with
    ``pairedge.core.features.liang2026.to_gray`` (OpenCV's ``COLOR_BGR2GRAY`` differs by one level on ~0.1 %
    of pixels, enough to move the flow columns by up to 1e-4 relative).
    """

    @dataclass(frozen=True, kw_only=True)
    class Options(FlowOptions):
        """Farneback options.

        Attributes:
            scale: resize factor in (0, 1]; 1.0 (default) is what ``liang2026`` models were trained with, and
                only 1.0 reproduces the released code's features.
        """

        scale: float = 1.0

    name = "farneback"
    options: FarnebackFlow.Options

    def __init__(self, options: FarnebackFlow.Options | None = None, *, scale: float | None = None) -> None:
        super().__init__(options, scale=scale)
        self._params = dict(FARNEBACK_PARAMS)
        self._luma = PilLuma()

    def to_gray(self, image: np.ndarray, out: np.ndarray) -> np.ndarray:
        """PIL's luma of an (H, W, 3) BGR uint8 frame into ``out`` ((H, W) uint8), buffers reused."""
        return self._luma(image, out)

    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        result = cv2.calcOpticalFlowFarneback(prev_small, small, out, **self._params)
        if result is not out:  # OpenCV reallocated (should not happen with a matching buffer)
            np.copyto(out, result)
