"""Device memory, pinned host memory and a stream for the native TensorRT backend.

Two implementations of one small interface (:class:`CudaMemory`):

- :class:`CudaPythonMemory` — NVIDIA's ``cuda-python`` (``cuda.bindings.runtime``; older releases expose the
  same functions as ``cuda.cudart``). The default: prebuilt wheels for x86-64 and Jetson aarch64.
- :class:`PyCudaMemory` — ``pycuda`` (driver API, primary context), accepted when it is what the user has.

Both allocate device buffers with the CUDA allocator, host buffers page-locked (pinned, so asynchronous
copies really are asynchronous), create one stream, and free everything in :meth:`CudaMemory.close`.
Nothing here is imported at package import time; the CUDA packages are imported when an instance is made.
"""

from __future__ import annotations

import ctypes
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge._optional import require
from pairedge.errors import BackendError, DeviceUnavailableError, InputError, MissingDependencyError

KINDS: tuple[str, ...] = ("auto", "cuda-python", "pycuda")


@dataclass(frozen=True)
class DeviceInfo:
    """The GPU a backend runs on.

    Attributes:
        index: CUDA device ordinal.
        name: as CUDA reports it ("Orin", "NVIDIA H200").
        compute_capability: "major.minor", e.g. "8.7".
        cuda_version: CUDA runtime (cuda-python) or driver API (pycuda) version, "major.minor".
    """

    index: int
    name: str
    compute_capability: str
    cuda_version: str


class CudaMemory(ABC):
    """Buffers and one stream on one device; :meth:`close` frees what this instance allocated."""

    kind: str = ""

    @abstractmethod
    def device_info(self) -> DeviceInfo:
        """Name, compute capability and CUDA version of the device."""

    @abstractmethod
    def create_stream(self) -> Any:
        """A new stream (owned by this instance)."""

    @abstractmethod
    def stream_handle(self, stream: Any) -> int:
        """The ``cudaStream_t`` as an int, as ``IExecutionContext.execute_async_v3`` takes it."""

    @abstractmethod
    def alloc_device(self, nbytes: int) -> int:
        """A device allocation of ``nbytes``; returns its address."""

    @abstractmethod
    def alloc_pinned(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A page-locked host array of ``shape`` and ``dtype``."""

    @abstractmethod
    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any) -> None:
        """Queue a copy of the C-contiguous pinned ``host`` array (all its bytes) to ``device_ptr``."""

    @abstractmethod
    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any) -> None:
        """Queue a copy of ``host.nbytes`` bytes from ``device_ptr`` into the pinned ``host`` array."""

    @abstractmethod
    def synchronize(self, stream: Any) -> None:
        """Wait until the stream's queued work has finished."""

    @abstractmethod
    def close(self) -> None:
        """Free every buffer and stream this instance made. Idempotent."""


def _version(number: int) -> str:
    return f"{number // 1000}.{(number % 1000) // 10}"


class CudaPythonMemory(CudaMemory):
    """``cuda-python`` runtime API (``cudaMalloc``, ``cudaMallocHost``, ``cudaMemcpyAsync``, streams)."""

    kind = "cuda-python"

    def __init__(self, device: int = 0, rt: Any = None) -> None:
        self._rt = rt if rt is not None else _cuda_runtime_module()
        self.device = device
        self._device_ptrs: list[int] = []
        self._host_ptrs: list[int] = []
        self._streams: list[Any] = []
        self._call("cudaSetDevice", device)

    def _call(self, name: str, *args: Any) -> Any:
        result = getattr(self._rt, name)(*args)
        err, rest = (result[0], result[1:]) if isinstance(result, tuple) else (result, ())
        if err != self._rt.cudaError_t.cudaSuccess:
            what = getattr(err, "name", str(err))
            if name in ("cudaSetDevice", "cudaGetDeviceProperties", "cudaRuntimeGetVersion"):
                raise DeviceUnavailableError(
                    f"CUDA device {self.device} is not usable ({name} -> {what}); run `pairedge doctor` "
                    "(no NVIDIA GPU or driver here?)"
                )
            raise BackendError(f"CUDA {name} failed: {what}")
        return rest[0] if len(rest) == 1 else rest

    def device_info(self) -> DeviceInfo:
        prop = self._call("cudaGetDeviceProperties", self.device)
        raw = prop.name
        name = (
            raw.split(b"\0", 1)[0].decode(errors="replace")
            if isinstance(raw, bytes | bytearray)
            else str(raw)
        )
        return DeviceInfo(
            index=self.device,
            name=name.strip(),
            compute_capability=f"{prop.major}.{prop.minor}",
            cuda_version=_version(int(self._call("cudaRuntimeGetVersion"))),
        )

    def create_stream(self) -> Any:
        stream = self._call("cudaStreamCreate")
        self._streams.append(stream)
        return stream

    def stream_handle(self, stream: Any) -> int:
        return int(stream)

    def alloc_device(self, nbytes: int) -> int:
        ptr = int(self._call("cudaMalloc", int(nbytes)))
        self._device_ptrs.append(ptr)
        return ptr

    def alloc_pinned(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        nbytes = max(count * dt.itemsize, 1)
        ptr = int(self._call("cudaMallocHost", nbytes))
        self._host_ptrs.append(ptr)
        raw = (ctypes.c_byte * nbytes).from_address(ptr)
        return np.frombuffer(memoryview(raw), dtype=dt, count=count).reshape(shape)

    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any) -> None:
        kind = self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._call("cudaMemcpyAsync", device_ptr, host.ctypes.data, host.nbytes, kind, stream)

    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any) -> None:
        kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._call("cudaMemcpyAsync", host.ctypes.data, device_ptr, host.nbytes, kind, stream)

    def synchronize(self, stream: Any) -> None:
        self._call("cudaStreamSynchronize", stream)

    def close(self) -> None:
        streams, self._streams = self._streams, []
        devs, self._device_ptrs = self._device_ptrs, []
        hosts, self._host_ptrs = self._host_ptrs, []
        for stream in streams:
            self._rt.cudaStreamDestroy(stream)
        for ptr in devs:
            self._rt.cudaFree(ptr)
        for ptr in hosts:
            self._rt.cudaFreeHost(ptr)


def _cuda_runtime_module() -> Any:
    try:
        from cuda.bindings import runtime  # cuda-python >= 12.6

        return runtime
    except ImportError:
        pass
    return require("cuda.cudart", extra="gpu", purpose="the native TensorRT backend (cuda-python)")


class PyCudaMemory(CudaMemory):
    """``pycuda`` driver API on the device's primary context (pushed for this instance's lifetime)."""

    kind = "pycuda"

    def __init__(self, device: int = 0, driver: Any = None) -> None:
        self._cuda = (
            driver if driver is not None else require("pycuda.driver", extra="gpu", purpose="pycuda memory")
        )
        try:
            self._cuda.init()
            self._device = self._cuda.Device(device)
            self._context = self._device.retain_primary_context()
            self._context.push()
        except Exception as exc:  # pycuda raises pycuda.driver.Error subclasses
            raise DeviceUnavailableError(
                f"CUDA device {device} is not usable through pycuda ({exc})"
            ) from None
        self.device = device
        self._buffers: list[Any] = []

    def device_info(self) -> DeviceInfo:
        major, minor = self._device.compute_capability()
        version = self._cuda.get_driver_version()
        return DeviceInfo(self.device, str(self._device.name()), f"{major}.{minor}", _version(int(version)))

    def create_stream(self) -> Any:
        return self._cuda.Stream()

    def stream_handle(self, stream: Any) -> int:
        return int(stream.handle)

    def alloc_device(self, nbytes: int) -> int:
        buf = self._cuda.mem_alloc(int(nbytes))
        self._buffers.append(buf)
        return int(buf)

    def alloc_pinned(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return self._cuda.pagelocked_empty(shape, np.dtype(dtype))

    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any) -> None:
        self._cuda.memcpy_htod_async(device_ptr, host, stream)

    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any) -> None:
        self._cuda.memcpy_dtoh_async(host, device_ptr, stream)

    def synchronize(self, stream: Any) -> None:
        stream.synchronize()

    def close(self) -> None:
        buffers, self._buffers = self._buffers, []
        for buf in buffers:
            buf.free()
        if getattr(self, "_context", None) is not None:
            self._context.pop()
            self._context.detach()
            self._context = None


def open_cuda_memory(kind: str = "auto", device: int = 0) -> CudaMemory:
    """The memory layer by name; "auto" tries cuda-python first, then pycuda.

    Raises:
        InputError: unknown kind. MissingDependencyError: neither package installed.
        DeviceUnavailableError: no usable GPU.
    """
    if kind not in KINDS:
        raise InputError(f"cuda memory: expected one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "cuda-python":
        return CudaPythonMemory(device)
    if kind == "pycuda":
        return PyCudaMemory(device)
    try:
        rt = _cuda_runtime_module()
    except ImportError as exc:
        try:
            return PyCudaMemory(device)
        except ImportError:
            raise MissingDependencyError(
                f"the native TensorRT backend needs cuda-python or pycuda, neither is importable ({exc}); "
                "install it with: pip install 'pairedge[gpu]'"
            ) from None
    return CudaPythonMemory(device, rt=rt)
