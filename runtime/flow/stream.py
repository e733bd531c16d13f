"""Flow over a stream of frames: each frame is converted and resized once, the previous one is kept.

:class:`FlowStream` owns two reused frame buffers at the backend's scale (ping-pong) and one grayscale
buffer, so pushing a frame allocates nothing once the resolution is known. :meth:`FlowStream.push` never
raises for a frame the backend cannot handle (smaller than its minimum after scaling, or a flow failure):
it returns None and says why in :attr:`FlowStream.reason`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import cv2
import numpy as np
from pairedge.core.errors import InputError, PairedgeError
from pairedge.runtime.flow.base import FlowBackend

T = TypeVar("T")


class FlowStream:
    """Feeds consecutive frames to a :class:`FlowBackend`.

    Args:
        backend: the flow backend; its ``scale`` decides the buffer size.
    """

    def __init__(self, backend: FlowBackend) -> None:
        self.backend = backend
        self._slots: list[np.ndarray] = [np.empty((0, 0), np.uint8), np.empty((0, 0), np.uint8)]
        self._gray = np.empty((0, 0), np.uint8)
        self._cur = 0
        self._has_prev = False
        self._shape: tuple[int, int] | None = None
        self._too_small: str | None = None
        #: Why the last :meth:`push` returned None (first frame, frame too small, flow failure).
        self.reason: str | None = None

    @property
    def scale(self) -> float:
        return self.backend.scale

    @property
    def primed(self) -> bool:
        """The stream holds a previous frame: the next push of a frame of the same size gives flow."""
        return self._has_prev

    def reset(self) -> None:
        """Forget the previous frame (after a dropped frame or a cut)."""
        self._has_prev = False

    def push(self, image: np.ndarray) -> np.ndarray | None:
        """Add a frame; return the flow from the previous frame to it.

        Args:
            image: (H, W) uint8 gray or (H, W, 3) uint8 BGR (already validated).

        Returns:
            (h, w, 2) float32 flow at the backend's scale (reused buffer, valid until the next push), or None
            for the first frame, after :meth:`reset`, when the resolution changed, for a frame below the
            backend's minimum size after scaling, or when the backend failed (:attr:`reason` says which).
        """
        return self._push(image, self.backend.compute_scaled)

    def _push(self, image: np.ndarray, compute: Callable[[np.ndarray, np.ndarray], T]) -> T | None:
        """Add a frame; ``compute(previous scaled frame, this scaled frame)`` when there is a previous one."""
        shape = (int(image.shape[0]), int(image.shape[1]))
        if shape != self._shape:
            self._allocate(shape)
        if self._too_small is not None:
            self.reason = self._too_small
            return None
        self._cur ^= 1
        self._fill(image, self._slots[self._cur])
        if not self._has_prev:
            self._has_prev = True
            self.reason = "no previous frame: flow not available for this frame"
            return None
        try:
            flow = compute(self._slots[self._cur ^ 1], self._slots[self._cur])
        except PairedgeError as exc:  # defensive: sizes are checked above; the flow restarts next frame
            self._has_prev = False
            self.reason = f"flow failed ({type(exc).__name__}: {exc}); no flow for this frame"
            return None
        self.reason = None
        return flow

    def _allocate(self, shape: tuple[int, int]) -> None:
        self._too_small = self.backend.size_problem(*shape)
        h, w = self.backend.scaled_shape(*shape)
        self._slots = [np.empty((h, w), np.uint8), np.empty((h, w), np.uint8)]
        self._gray = np.empty(shape, np.uint8)
        self._shape = shape
        self._has_prev = False

    def _fill(self, image: np.ndarray, slot: np.ndarray) -> None:
        if image.ndim == 3 and image.shape[2] == 3:
            if self.backend.scale == 1.0:
                self.backend.to_gray(image, slot)
                return
            gray = self.backend.to_gray(image, self._gray)
        elif image.ndim == 2:
            gray = image
        else:
            raise InputError(
                f"flow stream: expected (H, W) gray or (H, W, 3) BGR uint8, got shape {image.shape}"
            )
        if self.backend.scale == 1.0:
            np.copyto(slot, gray)
        else:
            cv2.resize(gray, (slot.shape[1], slot.shape[0]), dst=slot, interpolation=cv2.INTER_AREA)
