"""Device memory, pinned host memory and a stream for the native TensorRT backend: the one CUDA layer.

The backend's memory is a :class:`pairedge.gpu.cuda.Device` (cuda-python by default, pycuda accepted; see
:mod:`pairedge.gpu.cuda`): device buffers from the CUDA allocator, page-locked host buffers (so asynchronous
copies really are asynchronous), a stream, and :meth:`~pairedge.gpu.cuda.Device.close`, which frees
everything. A TensorRT engine needs a GPU, so the emulated device is never opened here
(``PAIREDGE_CUDA_EMULATION`` is ignored); tests inject it as the backend's ``memory`` to run the buffer
handling for real. Nothing here imports a CUDA package; the layer imports one when a device is opened.
"""

from __future__ import annotations

from pairedge.core.errors import InputError
from pairedge.gpu.cuda import Device, DeviceInfo, open_device

#: The memory implementations a TensorRT backend may ask for.
KINDS: tuple[str, ...] = ("auto", "cuda-python", "pycuda")

#: What the TensorRT backend and the engine builder hold: a device of the one CUDA layer.
CudaMemory = Device


def open_cuda_memory(kind: str = "auto", device: int = 0) -> Device:
    """The memory layer by name; "auto" tries cuda-python first, then pycuda (never the emulated device).

    Raises:
        InputError: unknown kind. MissingDependencyError: neither package installed.
        DeviceUnavailableError: no usable GPU.
    """
    if kind not in KINDS:
        raise InputError(f"cuda memory: expected one of {', '.join(KINDS)}, got {kind!r}")
    return open_device(kind, device, emulation=False)


__all__ = ["KINDS", "CudaMemory", "DeviceInfo", "open_cuda_memory"]
