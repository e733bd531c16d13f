"""Flow backends that reduce on the device: the runtime side of the dense-or-pooled contract.

A plain :class:`~pairedge.runtime.flow.FlowBackend` returns a dense (h, w, 2) field that the feature spec
pools on the CPU. A backend with ``fuses_pooling = True`` also offers :meth:`PoolingBackend.compute_pooled`:
given this frame's boxes it returns a :class:`pairedge.features.flowpool.PooledFlow` (per-box sums and the
background grid) instead, so the dense field never leaves the device. :class:`PooledFlowStream` feeds such a
backend frame by frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from pairedge.features.flowpool import PooledFlow
from pairedge.runtime.flow.base import FlowBackend
from pairedge.runtime.flow.stream import FlowStream


@dataclass(frozen=True)
class PoolRequest:
    """What the feature spec needs pooled this frame.

    Attributes:
        boxes: (N, 4) float64 ``x y w h`` full-image boxes (the spec's usable rows, in their order).
        inset: the spec's ``pool_inset``; grid_step: the spec's ``grid_step`` (flow pixels).
    """

    boxes: np.ndarray
    inset: tuple[float, float] = (0.15, 0.05)
    grid_step: int = 8


@runtime_checkable
class PoolingBackend(Protocol):
    """A flow backend that can return pooled statistics instead of a dense field."""

    fuses_pooling: bool
    scale: float

    def compute_pooled(self, prev_small: np.ndarray, small: np.ndarray, request: PoolRequest) -> PooledFlow:
        """Flow between two scaled (h, w) uint8 frames, reduced to ``request``'s statistics."""
        ...


def fuses_pooling(backend: object) -> bool:
    """Whether ``backend`` returns :class:`PooledFlow` when asked (the CUDA backend; the reference on request)."""
    return bool(getattr(backend, "fuses_pooling", False)) and isinstance(backend, PoolingBackend)


class PooledFlowStream(FlowStream):
    """:class:`FlowStream` for a pooling backend: :meth:`push_pooled` returns a :class:`PooledFlow`."""

    def __init__(self, backend: FlowBackend) -> None:
        if not fuses_pooling(backend):
            raise TypeError(f"{backend!r} does not pool on the device; use FlowStream")
        super().__init__(backend)

    def push_pooled(self, image: np.ndarray, request: PoolRequest) -> PooledFlow | None:
        """Add a frame; the pooled flow from the previous frame to it, or None (first frame, new size)."""
        shape = (int(image.shape[0]), int(image.shape[1]))
        if shape != self._shape:
            self._allocate(shape)
        self._cur ^= 1
        self._fill(image, self._slots[self._cur])
        if not self._has_prev:
            self._has_prev = True
            return None
        backend: PoolingBackend = self.backend  # type: ignore[assignment]
        return backend.compute_pooled(self._slots[self._cur ^ 1], self._slots[self._cur], request)
