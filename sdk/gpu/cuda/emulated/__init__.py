"""The emulated CUDA device: the project's CUDA C kernels executed on the CPU by HIP-CPU (a test and
debugging device; see :mod:`.device`). Chosen only explicitly: ``PAIREDGE_CUDA_EMULATION=hip-cpu`` or
``kind="hip-cpu"``; :func:`pairedge.gpu.cuda.open_device` never falls back to it."""

from pairedge.gpu.cuda.emulated.toolchain import find_toolchain, unavailable_reason

__all__ = ["find_toolchain", "unavailable_reason"]
