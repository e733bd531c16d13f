"""OpenCV Farneback flow with the exact parameters of the ``liang2026`` features (the paper's released code)."""

from __future__ import annotations

import cv2
import numpy as np
from pairedge.features.liang2026 import FARNEBACK_PARAMS
from pairedge.runtime.flow.base import FlowBackend


class FarnebackFlow(FlowBackend):
    """Farneback dense flow (pyramid scale 0.5, 3 levels, window 15, 3 iterations, poly_n 5, poly_sigma 1.2).

    Args:
        scale: resize factor in (0, 1]; 1.0 (default) is what ``liang2026`` models were trained with, and
            only 1.0 reproduces the released code's features.

    Grayscale conversion (``cv2.COLOR_BGR2GRAY``, ITU-R 601 luma) happens before the backend, in
    :class:`~pairedge.runtime.flow.FlowStream`, identical to ``pairedge.features.liang2026.to_gray``.
    """

    name = "farneback"

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__(scale)
        self._params = dict(FARNEBACK_PARAMS)

    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        result = cv2.calcOpticalFlowFarneback(prev_small, small, out, **self._params)
        if result is not out:  # OpenCV reallocated (should not happen with a matching buffer)
            np.copyto(out, result)
