"""The layer on NVIDIA's ``cuda-python`` driver API (``cuda.bindings.driver``): the default implementation.

The device's primary context (the one the CUDA runtime, and so TensorRT, uses), one non-blocking default
stream, ``cuMemAlloc`` / ``cuMemHostAlloc`` memory, modules from NVRTC (:mod:`.nvrtc`), CUDA graphs by
stream capture. Every driver error becomes a :class:`~pairedge.core.errors.BackendError` naming the call, the
CUDA error and how to fix it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
from pairedge.core.errors import BackendError, DeviceUnavailableError
from pairedge.core.optional import require
from pairedge.gpu.cuda.base import Arg, Device, DeviceInfo, Kernel, Limits
from pairedge.gpu.cuda.nvrtc import build_for, load_error_hint

_CTYPES = {"p": ctypes.c_uint64, "i": ctypes.c_int, "f": ctypes.c_float}


def version_text(number: int) -> str:
    """12060 -> "12.6"."""
    return f"{number // 1000}.{(number % 1000) // 10}"


class CudaPythonDevice(Device):
    """``cuda.bindings.driver`` on device ``device`` (``drv``: an injected module, for tests)."""

    kind = "cuda-python"
    supports_graphs = True

    def __init__(self, device: int = 0, drv: Any = None) -> None:
        self.drv = drv if drv is not None else require("cuda.bindings.driver", purpose="the CUDA layer")
        self.ctx = None
        try:
            self._ok(self.drv.cuInit(0), "cuInit")
            (count,) = self._ok(self.drv.cuDeviceGetCount(), "cuDeviceGetCount")
        except BackendError as exc:
            raise DeviceUnavailableError(
                f"CUDA device {device} is not usable ({exc}); run `pairedge doctor`"
            ) from None
        except Exception as exc:  # DynamicLibNotFoundError when libcuda is absent
            raise DeviceUnavailableError(
                f"CUDA device {device} is not usable (no CUDA driver: {type(exc).__name__}: {exc}); "
                "run `pairedge doctor` (no NVIDIA GPU or driver here?)"
            ) from None
        if not 0 <= device < int(count):
            raise DeviceUnavailableError(f"CUDA device {device} requested, {count} CUDA device(s) present")
        (self.dev,) = self._ok(self.drv.cuDeviceGet(device), "cuDeviceGet")
        (raw,) = self._ok(self.drv.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        (driver_version,) = self._ok(self.drv.cuDriverGetVersion(), "cuDriverGetVersion")
        a = self._attribute
        name = bytes(raw).split(b"\0")[0].decode(errors="replace").strip()
        cc = f"{a('COMPUTE_CAPABILITY_MAJOR')}.{a('COMPUTE_CAPABILITY_MINOR')}"
        self.info = DeviceInfo(device, name, cc, version_text(int(driver_version)))
        self.limits = Limits(
            a("MAX_THREADS_PER_BLOCK"),
            (a("MAX_BLOCK_DIM_X"), a("MAX_BLOCK_DIM_Y"), a("MAX_BLOCK_DIM_Z")),
            (a("MAX_GRID_DIM_X"), a("MAX_GRID_DIM_Y"), a("MAX_GRID_DIM_Z")),
            a("MAX_SHARED_MEMORY_PER_BLOCK"),
        )
        (self.ctx,) = self._ok(self.drv.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self._ok(self.drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self._device: list[Any] = []
        self._host: list[int] = []
        self._streams: list[Any] = []
        self._events: list[Any] = []
        self._modules: list[Any] = []
        self._keep: list[Any] = []
        self.stream = self.create_stream()

    def _attribute(self, name: str) -> int:
        attr = getattr(self.drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        (value,) = self._ok(self.drv.cuDeviceGetAttribute(attr, self.dev), f"cuDeviceGetAttribute({name})")
        return int(value)

    def _ok(self, result: tuple, what: str) -> tuple:  # type: ignore[type-arg]
        err = result[0]
        if err != self.drv.CUresult.CUDA_SUCCESS:
            name = str(getattr(err, "name", err))
            raise BackendError(f"CUDA {what} failed with {name}; {load_error_hint(name, 'code')}")
        return tuple(result[1:])

    def _s(self, stream: Any) -> Any:
        return self.stream if stream is None else stream

    # -- memory -----------------------------------------------------------------------------------------
    def alloc_device(self, nbytes: int) -> int:
        (ptr,) = self._ok(self.drv.cuMemAlloc(max(int(nbytes), 4)), f"cuMemAlloc({nbytes})")
        self._device.append(ptr)
        return int(ptr)

    def alloc_pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        n = max(count * dt.itemsize, 4)
        (ptr,) = self._ok(self.drv.cuMemHostAlloc(n, 0), f"cuMemHostAlloc({n})")
        self._host.append(int(ptr))
        raw = (ctypes.c_uint8 * n).from_address(int(ptr))
        return np.frombuffer(memoryview(raw), dtype=dt, count=count).reshape(shape)

    def mark(self) -> tuple[int, int]:
        return len(self._device), len(self._host)

    def release(self, mark: tuple[int, int]) -> None:
        for ptr in self._device[mark[0] :]:
            self.drv.cuMemFree(ptr)
        for hptr in self._host[mark[1] :]:
            self.drv.cuMemFreeHost(hptr)
        del self._device[mark[0] :], self._host[mark[1] :]

    # -- streams, copies, events -----------------------------------------------------------------------
    def create_stream(self) -> Any:
        (stream,) = self._ok(self.drv.cuStreamCreate(1), "cuStreamCreate")  # non-blocking
        self._streams.append(stream)
        return stream

    def stream_handle(self, stream: Any) -> int:
        return int(stream)

    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any = None) -> None:
        self._ok(
            self.drv.cuMemcpyHtoDAsync(device_ptr, host.ctypes.data, host.nbytes, self._s(stream)),
            "cuMemcpyHtoDAsync",
        )

    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any = None) -> None:
        self._ok(
            self.drv.cuMemcpyDtoHAsync(host.ctypes.data, device_ptr, host.nbytes, self._s(stream)),
            "cuMemcpyDtoHAsync",
        )

    def memset_async(self, device_ptr: int, nbytes: int, stream: Any = None) -> None:
        self._ok(self.drv.cuMemsetD32Async(device_ptr, 0, nbytes // 4, self._s(stream)), "cuMemsetD32Async")

    def synchronize(self, stream: Any = None) -> None:
        self._ok(self.drv.cuStreamSynchronize(self._s(stream)), "cuStreamSynchronize")

    def event(self) -> Any:
        (ev,) = self._ok(self.drv.cuEventCreate(0), "cuEventCreate")
        self._events.append(ev)
        return ev

    def record(self, event: Any, stream: Any = None) -> None:
        self._ok(self.drv.cuEventRecord(event, self._s(stream)), "cuEventRecord")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        self._ok(self.drv.cuEventSynchronize(end), "cuEventSynchronize")
        (ms,) = self._ok(self.drv.cuEventElapsedTime(start, end), "cuEventElapsedTime")
        return float(ms)

    # -- code -------------------------------------------------------------------------------------------
    def _load(self, name: str, source: str) -> tuple[Any, str, str]:
        code, how, target = build_for(name, source, self.info.arch)
        image = np.frombuffer(code + b"\0", np.uint8).copy()
        self._keep.append(image)
        err, module = self.drv.cuModuleLoadData(image.ctypes.data)
        if err != self.drv.CUresult.CUDA_SUCCESS:
            raise BackendError(
                f"CUDA: loading the {target.kind} of {name} failed with {err.name}; "
                f"{load_error_hint(err.name, target.kind)}"
            )
        self._modules.append(module)
        return module, how, f"{target.kind} {target.arch}"

    def _function(self, module: Any, name: str) -> Any:
        (fn,) = self._ok(self.drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        return fn

    def _launch(
        self,
        kernel: Kernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        args: Sequence[Arg],
        stream: Any,
    ) -> None:
        values: list[Any] = [_CTYPES[k](v) for k, v in args]
        params = np.array([ctypes.addressof(v) for v in values], np.uint64)
        self._ok(
            self.drv.cuLaunchKernel(
                kernel.handle, *grid, *block, shared, self._s(stream), params.ctypes.data, 0
            ),
            f"cuLaunchKernel({kernel.name})",
        )

    # -- graphs, context, lifetime ------------------------------------------------------------------------
    def activate(self) -> None:
        self._ok(self.drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def begin_capture(self) -> None:
        mode = self.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._ok(self.drv.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")

    def end_capture(self) -> Any:
        (graph,) = self._ok(self.drv.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        try:
            (exe,) = self._ok(self.drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            self.drv.cuGraphDestroy(graph)
        return exe

    def graph_launch(self, graph: Any) -> None:
        self._ok(self.drv.cuGraphLaunch(graph, self.stream), "cuGraphLaunch")

    def graph_destroy(self, graph: Any) -> None:
        self.drv.cuGraphExecDestroy(graph)

    def close(self) -> None:
        if self.ctx is None:  # a second release would drop a reference someone else holds
            return
        self.drv.cuCtxSetCurrent(self.ctx)
        for stream in self._streams:
            self.drv.cuStreamSynchronize(stream)
        self.release((0, 0))
        for ev in self._events:
            self.drv.cuEventDestroy(ev)
        for stream in self._streams:
            self.drv.cuStreamDestroy(stream)
        for module in self._modules:
            self.drv.cuModuleUnload(module)
        self._events, self._streams, self._modules, self._keep = [], [], [], []
        self.drv.cuDevicePrimaryCtxRelease(self.dev)
        self.ctx = None
