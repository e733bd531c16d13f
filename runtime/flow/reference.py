"""The CPU reference of the CUDA flow, usable as a flow backend (``flow="reference"``).

Computes the robust pyramidal Lucas-Kanade flow of :mod:`pairedge.runtime.flow.lk_reference` in numpy, the
same algorithm the CUDA backend runs. With ``pooled=True`` it also plays the fused backend's part on the
CPU: the runtime asks it for the :class:`~pairedge.core.features.flowpool.PooledFlow` the GPU kernels return
(:meth:`FlowBackend.compute_pooled`, the CPU reduction of the dense field), so the whole pooled path of the
runtime runs and is tested without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.runtime.flow.base import FlowBackend, FlowOptions
from pairedge.runtime.flow.lk_reference import LKParams, lk_flow


class ReferenceFlow(FlowBackend):
    """Numpy robust pyramidal LK flow (the CUDA backend's reference).

    Args:
        options: :class:`ReferenceFlow.Options`, or None and its fields as keywords.
    """

    @dataclass(frozen=True, kw_only=True)
    class Options(FlowOptions):
        """Reference flow options.

        Attributes:
            scale: resize factor in (0, 1] (default 0.5, as DIS).
            params: algorithm parameters (None: :class:`LKParams`' defaults).
            pooled: when True the runtime asks this backend for pooled statistics (as it asks the CUDA one).
        """

        scale: float = 0.5
        params: LKParams | None = None
        pooled: bool = False

    name = "reference"
    options: ReferenceFlow.Options

    def __init__(
        self,
        options: ReferenceFlow.Options | None = None,
        *,
        scale: float | None = None,
        params: LKParams | None = None,
        pooled: bool | None = None,
    ) -> None:
        super().__init__(options, scale=scale, params=params, pooled=pooled)
        self.params = self.options.params or LKParams()
        self.fuses_pooling = bool(self.options.pooled)

    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        np.copyto(out, lk_flow(prev_small, small, self.params))

    def __repr__(self) -> str:
        return f"ReferenceFlow(scale={self.scale}, pooled={self.fuses_pooling})"
