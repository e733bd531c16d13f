"""CUDA optical flow with fused per-person pooling (backend name ``"cuda"``).

* ``kernels/*.cu``: plain CUDA C sources (the flow of :mod:`pairedge.runtime.flow.lk_reference` and the
  pooling of :func:`pairedge.features.flowpool.pooled_reference`), compiled at first use with NVRTC and
  cached per device architecture (:mod:`.compile`).
* :mod:`.api`: the launch layer, ``cuda-python`` (``cuda.bindings``: NVRTC + driver API) by default, ``pycuda``
  as the alternative; one stream, buffers allocated once per frame size, pinned host staging.
* :mod:`.backend`: :class:`CudaFlow`, a :class:`~pairedge.runtime.flow.FlowBackend` that also returns
  :class:`~pairedge.features.flowpool.PooledFlow` so only N x 4 sums and the background grid leave the GPU.

Nothing here imports a CUDA package at module level.
"""

KERNEL_FILES = ("lk.cu", "pool.cu")

__all__ = ["KERNEL_FILES"]
