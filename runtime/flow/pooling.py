"""Flow backends that reduce on the device: the runtime side of the dense-or-pooled contract.

A :class:`~pairedge.runtime.flow.FlowBackend` returns a dense (h, w, 2) field that the feature spec pools on
the CPU. One with :attr:`~pairedge.runtime.flow.FlowBackend.fuses_pooling` is asked for
:meth:`~pairedge.runtime.flow.FlowBackend.compute_pooled` instead: given this frame's boxes it returns a
:class:`pairedge.core.features.flowpool.PooledFlow` (per-box sums and the background grid), so the dense
field never leaves the device. :class:`PooledFlowStream` feeds such a backend frame by frame; the feature
config says what to pool (:func:`pool_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.core.features.base import usable_rows
from pairedge.core.features.edge import PairedgeConfig
from pairedge.core.features.flowpool import PooledFlow
from pairedge.core.types import Detections
from pairedge.runtime.flow.base import FlowBackend, PoolRequest
from pairedge.runtime.flow.stream import FlowStream

__all__ = ["PoolRequest", "PoolSettings", "PooledFlowStream", "make_stream", "pool_settings", "push_frame"]


@dataclass(frozen=True)
class PoolSettings:
    """How a feature config pools flow per person.

    Attributes:
        inset: fraction of the box width / height trimmed on each side (``pool_inset``).
        grid_step: spacing of the background samples in flow pixels (``grid_step``).
    """

    inset: tuple[float, float]
    grid_step: int


def pool_settings(feature_config: Any) -> PoolSettings | None:
    """The per-person pooling of a normalised feature config
    (:class:`~pairedge.core.features.edge.PairedgeConfig`), None for a config whose features take the dense
    field (``liang2026``)."""
    if not isinstance(feature_config, PairedgeConfig):
        return None
    inset = feature_config.pool_inset
    return PoolSettings((float(inset[0]), float(inset[1])), int(feature_config.grid_step))


class PooledFlowStream(FlowStream):
    """:class:`FlowStream` for a pooling backend: :meth:`push_pooled` returns a :class:`PooledFlow`.

    Frame handling (grey conversion, resize, reused buffers, size changes, reported failures) is
    :class:`FlowStream`'s; only the backend call differs (:meth:`FlowBackend.compute_pooled`).

    Raises:
        TypeError: ``backend`` does not fuse pooling (a dense backend goes in a :class:`FlowStream`).
    """

    def __init__(self, backend: FlowBackend) -> None:
        if not backend.fuses_pooling:
            raise TypeError(f"{backend!r} does not pool on the device; use FlowStream")
        super().__init__(backend)

    def push_pooled(self, image: np.ndarray, request: PoolRequest) -> PooledFlow | None:
        """Add a frame; the pooled flow from the previous frame to it, or None (first frame, new size)."""
        return self._push(image, lambda prev, cur: self.backend.compute_pooled(prev, cur, request))


def make_stream(backend: FlowBackend, pool: PoolSettings | None) -> FlowStream:
    """A :class:`PooledFlowStream` when ``backend`` pools on the device and the feature config pools per
    person (``pool`` given), else a plain :class:`FlowStream` (dense field; e.g. ``liang2026`` with any
    backend)."""
    return PooledFlowStream(backend) if pool is not None and backend.fuses_pooling else FlowStream(backend)


def push_frame(
    stream: FlowStream, image: np.ndarray, detections: Detections, pool: PoolSettings | None
) -> np.ndarray | PooledFlow | None:
    """Push ``image``; for a pooled stream, pool the feature spec's usable rows of ``detections``."""
    if not isinstance(stream, PooledFlowStream) or pool is None:
        return stream.push(image)
    boxes = np.asarray(detections.boxes, np.float64)[usable_rows(detections)]
    return stream.push_pooled(image, PoolRequest(boxes, pool.inset, pool.grid_step))
