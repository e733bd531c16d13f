"""Flow backends that reduce on the device: the runtime side of the dense-or-pooled contract.

A plain :class:`~pairedge.runtime.flow.FlowBackend` returns a dense (h, w, 2) field that the feature spec
pools on the CPU. A backend with ``fuses_pooling = True`` also offers :meth:`PoolingBackend.compute_pooled`:
given this frame's boxes it returns a :class:`pairedge.core.features.flowpool.PooledFlow` (per-box sums and the
background grid) instead, so the dense field never leaves the device. :class:`PooledFlowStream` feeds such a
backend frame by frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pairedge.core.features.base import usable_rows
from pairedge.core.features.flowpool import PooledFlow
from pairedge.core.types import Detections
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


class _PoolingView(FlowBackend):
    """Presents a pooling backend to :class:`FlowStream`: ``compute_scaled`` returns its PooledFlow."""

    name = "pooled"

    def __init__(self, backend: FlowBackend) -> None:
        super().__init__(backend.scale)
        self.inner = backend
        self.min_side = getattr(backend, "min_side", 1)
        self.request: PoolRequest | None = None

    def size_problem(self, height: int, width: int) -> str | None:
        check = getattr(self.inner, "size_problem", None)
        return None if check is None else check(height, width)

    def compute_scaled(self, prev_small: np.ndarray, small: np.ndarray) -> PooledFlow:  # type: ignore[override]
        assert self.request is not None
        backend: PoolingBackend = self.inner  # type: ignore[assignment]
        return backend.compute_pooled(prev_small, small, self.request)

    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        raise NotImplementedError("the pooled view only computes pooled flow")


class PooledFlowStream(FlowStream):
    """:class:`FlowStream` for a pooling backend: :meth:`push_pooled` returns a :class:`PooledFlow`.

    Frame handling (grey conversion, resize, reused buffers, size changes, reported failures) is
    :class:`FlowStream`'s; only the backend call differs.
    """

    def __init__(self, backend: FlowBackend) -> None:
        if not fuses_pooling(backend):
            raise TypeError(f"{backend!r} does not pool on the device; use FlowStream")
        self._view = _PoolingView(backend)
        super().__init__(self._view)
        self.pooling_backend = backend

    def push_pooled(self, image: np.ndarray, request: PoolRequest) -> PooledFlow | None:
        """Add a frame; the pooled flow from the previous frame to it, or None (first frame, new size)."""
        self._view.request = request
        return self.push(image)  # type: ignore[return-value]


def make_stream(backend: FlowBackend, feature_config: object) -> FlowStream:
    """A :class:`PooledFlowStream` when ``backend`` pools on the device and the feature config pools per
    person (has ``pool_inset`` and ``grid_step``, as :class:`pairedge.core.features.edge.PairedgeConfig`), else a
    plain :class:`FlowStream` (dense field; e.g. ``liang2026`` with any backend)."""
    pools = hasattr(feature_config, "pool_inset") and hasattr(feature_config, "grid_step")
    return PooledFlowStream(backend) if pools and fuses_pooling(backend) else FlowStream(backend)


def push_frame(
    stream: FlowStream, image: np.ndarray, detections: Detections, feature_config: Any
) -> np.ndarray | PooledFlow | None:
    """Push ``image``; for a pooled stream, pool the feature spec's usable rows of ``detections``."""
    if not isinstance(stream, PooledFlowStream):
        return stream.push(image)
    boxes = np.asarray(detections.boxes, np.float64)[usable_rows(detections)]
    inset = tuple(feature_config.pool_inset)
    request = PoolRequest(boxes, (float(inset[0]), float(inset[1])), int(feature_config.grid_step))
    return stream.push_pooled(image, request)


def flow_gpu_ms(backend: object) -> float | None:
    """GPU time (CUDA events) of the backend's last call, None for CPU backends and for the emulated CUDA
    device (its events time the CPU's emulation, which is no GPU time)."""
    if getattr(backend, "emulated", False):
        return None
    ms = getattr(backend, "last_gpu_ms", None)
    return None if ms is None else float(ms)
