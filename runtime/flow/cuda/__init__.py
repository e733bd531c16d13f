"""CUDA optical flow with fused per-person pooling (backend name ``"cuda"``).

* ``kernels/*.cu``: plain CUDA C sources (the flow of :mod:`pairedge.runtime.flow.lk_reference` and the
  pooling of :func:`pairedge.core.features.flowpool.pooled_reference`); :mod:`.kernels` names the kernels the
  backend takes from each and the block rules their code needs.
* :mod:`.backend`: :class:`CudaFlow`, a :class:`~pairedge.runtime.flow.FlowBackend` that also returns
  :class:`~pairedge.core.features.flowpool.PooledFlow` so only N x 4 sums and the background grid leave the
  GPU.

Devices, memory, streams, compilation (NVRTC on a GPU, HIP-CPU + g++ on the emulated device) and launches
are the one CUDA layer's, :mod:`pairedge.gpu.cuda`. Nothing here imports a CUDA package.
"""

KERNEL_FILES = ("lk.cu", "pool.cu")

__all__ = ["KERNEL_FILES"]
