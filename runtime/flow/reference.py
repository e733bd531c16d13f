"""The CPU reference of the CUDA flow, usable as a flow backend (``flow="reference"``).

Computes the robust pyramidal Lucas-Kanade flow of :mod:`pairedge.runtime.flow.lk_reference` in numpy, the
same algorithm the CUDA backend runs. With ``pooled=True`` it also plays the fused backend's part on the
CPU: :meth:`ReferenceFlow.compute_pooled` returns the :class:`~pairedge.core.features.flowpool.PooledFlow` the
GPU kernels return (:func:`~pairedge.core.features.flowpool.pooled_reference`), so the whole pooled path of the
runtime runs and is tested without a GPU.
"""

from __future__ import annotations

import numpy as np
from pairedge.core.features.flowpool import PooledFlow, pooled_reference
from pairedge.runtime.flow.base import FlowBackend
from pairedge.runtime.flow.lk_reference import LKParams, lk_flow
from pairedge.runtime.flow.pooling import PoolRequest


class ReferenceFlow(FlowBackend):
    """Numpy robust pyramidal LK flow (the CUDA backend's reference).

    Args:
        scale: resize factor in (0, 1] (default 0.5, as DIS).
        params: algorithm parameters (default :class:`LKParams`).
        pooled: when True the runtime asks this backend for pooled statistics (as it asks the CUDA one).
    """

    name = "reference"

    def __init__(self, scale: float = 0.5, params: LKParams | None = None, pooled: bool = False) -> None:
        super().__init__(scale)
        self.params = params or LKParams()
        self.fuses_pooling = bool(pooled)

    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        np.copyto(out, lk_flow(prev_small, small, self.params))

    def compute_pooled(self, prev_small: np.ndarray, small: np.ndarray, request: PoolRequest) -> PooledFlow:
        """Flow between two scaled frames reduced to ``request`` (the CPU twin of the fused kernels)."""
        field = self.compute_scaled(prev_small, small)
        return pooled_reference(field, request.boxes, self.scale, request.inset, request.grid_step)

    def __repr__(self) -> str:
        return f"ReferenceFlow(scale={self.scale}, pooled={self.fuses_pooling})"
