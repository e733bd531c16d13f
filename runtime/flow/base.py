"""The one optical-flow interface of the runtime.

A :class:`FlowBackend` computes dense flow between two grayscale frames at its own ``scale`` (1.0 = full
resolution, 0.5 = half width and height). Flow vectors are in pixels *of the scaled image*: to map a box
``x y w h`` onto the flow field multiply it by ``scale``; to turn a flow vector into full-resolution pixels
divide it by ``scale``. Backends keep their scaled inputs and their output in buffers reused from frame to
frame, so the array :meth:`FlowBackend.compute` returns is only valid until the next call (copy it to keep it).

Every backend declares :attr:`FlowBackend.min_side`, the smallest scaled image side it computes flow for
(OpenCV's DIS refuses images below about 12 px); :meth:`FlowBackend.size_problem` says why a frame size is
too small, :meth:`FlowBackend.compute` raises :class:`~pairedge.core.errors.InputError` for it, and
:class:`~pairedge.runtime.flow.FlowStream` turns it into "no flow for this frame" with that reason.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import cv2
import numpy as np
from pairedge.core.errors import BackendError, InputError


def scaled_size(height: int, width: int, scale: float) -> tuple[int, int]:
    """(h, w) of an image of ``height x width`` resized by ``scale`` (at least 1 x 1)."""
    return max(1, int(round(height * scale))), max(1, int(round(width * scale)))


class FlowBackend(ABC):
    """Dense optical flow between consecutive grayscale frames.

    Subclasses set :attr:`name`, implement :meth:`_flow` on already-scaled images and may override
    :meth:`unavailable_reason`. They never allocate per frame what could be reused.

    Args:
        scale: resize factor in (0, 1] applied to both frames before the flow is computed.
    """

    name: ClassVar[str] = ""
    #: Smallest side (pixels, after scaling) of frames this backend computes flow for.
    min_side: ClassVar[int] = 1

    def __init__(self, scale: float = 1.0) -> None:
        if not (isinstance(scale, int | float) and 0.0 < float(scale) <= 1.0):
            raise InputError(
                f"flow scale: expected a number in (0, 1], got {scale!r}; fix by passing e.g. 0.5"
            )
        self.scale = float(scale)
        self._small: list[np.ndarray] = []  # two reused resize targets (prev, cur)
        self._out: np.ndarray | None = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when the backend can run on this machine, else why not (shown by the registry)."""
        return None

    def scaled_shape(self, height: int, width: int) -> tuple[int, int]:
        """Shape (h, w) of the flow field this backend returns for ``height x width`` frames."""
        return scaled_size(height, width, self.scale)

    def size_problem(self, height: int, width: int) -> str | None:
        """Why frames of ``height x width`` (full resolution) are too small for this backend, or None."""
        h, w = self.scaled_shape(height, width)
        if min(h, w) >= self.min_side:
            return None
        return (
            f"frame {width}x{height} px at flow scale {self.scale:g} is {w}x{h} px, below the {self.min_side} px "
            f"per side that {type(self).__name__} needs; no flow for it (raise the flow scale or the resolution)"
        )

    def output_buffer(self, height: int, width: int) -> np.ndarray:
        """The reused (h, w, 2) float32 output buffer for scaled frames of ``height x width``, zeroed."""
        if self._out is None or self._out.shape[:2] != (height, width):
            self._out = np.zeros((height, width, 2), np.float32)
        else:
            self._out.fill(0.0)
        return self._out

    def resize(self, gray: np.ndarray, slot: int) -> np.ndarray:
        """``gray`` resized by :attr:`scale` into reused buffer ``slot`` (0 or 1); no copy at scale 1."""
        if self.scale == 1.0:
            return gray
        h, w = self.scaled_shape(*gray.shape[:2])
        while len(self._small) <= slot:
            self._small.append(np.empty((0, 0), np.uint8))
        if self._small[slot].shape != (h, w):
            self._small[slot] = np.empty((h, w), np.uint8)
        return cv2.resize(gray, (w, h), dst=self._small[slot], interpolation=cv2.INTER_AREA)

    def to_gray(self, image: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Grayscale of an (H, W, 3) BGR uint8 frame into ``out`` ((H, W) uint8): OpenCV's ITU-R 601 luma.

        A backend whose features were defined on another conversion overrides it (Farneback: PIL's, as the
        released ``liang2026`` code). :class:`~pairedge.runtime.flow.FlowStream` calls it once per frame.
        """
        return cv2.cvtColor(image, cv2.COLOR_BGR2GRAY, dst=out)

    def compute(self, prev_gray: np.ndarray, gray: np.ndarray) -> np.ndarray:
        """Flow from ``prev_gray`` to ``gray``.

        Args:
            prev_gray, gray: (H, W) uint8 grayscale frames of the same shape.

        Returns:
            (h, w, 2) float32 flow at :attr:`scale` (``h, w = scaled_shape(H, W)``), x then y component,
            in scaled pixels; a reused buffer, valid until the next call.
        """
        check_gray(prev_gray, "prev_gray")
        check_gray(gray, "gray")
        if prev_gray.shape != gray.shape:
            raise InputError(
                f"flow: expected two frames of the same shape, got {prev_gray.shape} and {gray.shape}; "
                "fix by resizing, or start a new stream when the camera resolution changes"
            )
        return self.compute_scaled(self.resize(prev_gray, 0), self.resize(gray, 1))

    def compute_scaled(self, prev_small: np.ndarray, small: np.ndarray) -> np.ndarray:
        """Flow between frames already resized by :attr:`scale` ((h, w) uint8, C-contiguous).

        Raises:
            InputError: a side is below :attr:`min_side`.
            BackendError: OpenCV failed on the frames (the message says why).
        """
        h, w = small.shape[:2]
        if min(h, w) < self.min_side:
            raise InputError(
                f"flow: expected scaled frames at least {self.min_side} px on a side for "
                f"{type(self).__name__}, got {w}x{h}; raise the flow scale or the resolution"
            )
        out = self.output_buffer(h, w)
        try:
            self._flow(prev_small, small, out)
        except cv2.error as exc:
            raise BackendError(f"flow: {type(self).__name__} failed on {w}x{h} frames ({exc.err})") from None
        return out

    @abstractmethod
    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        """Write the flow between two scaled (h, w) uint8 frames into ``out`` (h, w, 2) float32 (zeroed)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scale={self.scale})"


def check_gray(image: np.ndarray, what: str) -> None:
    """Raise InputError unless ``image`` is an (H, W) uint8 array."""
    if not isinstance(image, np.ndarray) or image.ndim != 2 or image.dtype != np.uint8 or image.size == 0:
        got = (
            f"{image.dtype} array of shape {image.shape}"
            if isinstance(image, np.ndarray)
            else type(image).__name__
        )
        raise InputError(
            f"flow {what}: expected an (H, W) uint8 grayscale image, got {got}; "
            "fix by converting with cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)"
        )
