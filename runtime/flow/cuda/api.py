"""The launch layer: one small interface over ``cuda-python`` (default) and ``pycuda`` (alternative).

:class:`GpuApi` holds one context (the device's primary context), one stream and the loaded modules; it
allocates device and pinned host memory, copies asynchronously on its stream, launches kernels, and times
with CUDA events. Every driver error becomes a :class:`~pairedge.errors.BackendError` that names the call,
the CUDA error and how to fix it. Kernel arguments are ``("p", device_pointer) | ("i", int) | ("f", float)``.
"""

from __future__ import annotations

import ctypes
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from pairedge._optional import require
from pairedge.errors import BackendError, MissingDependencyError

APIS = ("cuda-python", "pycuda")
_TOO_OLD = ("UNSUPPORTED_PTX_VERSION", "NO_BINARY_FOR_GPU", "INVALID_PTX", "JIT_COMPILER_NOT_FOUND")
Arg = tuple[str, Any]


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    except Exception:  # a binding that fails to load its libraries counts as absent
        return False
    return True


def resolve_api(name: str = "auto") -> str:
    """``"auto"`` -> "cuda-python" when ``cuda.bindings`` imports, else "pycuda"; names are checked.

    Raises:
        MissingDependencyError: neither is installed (or the named one is not).
    """
    if name not in ("auto", *APIS):
        raise BackendError(f"CUDA flow api: expected 'auto' or one of {APIS}, got {name!r}")
    order = APIS if name == "auto" else (name,)
    for api in order:
        if _importable("cuda.bindings.driver" if api == "cuda-python" else "pycuda.driver"):
            return api
    raise MissingDependencyError(
        f"CUDA flow: no launch layer ({' or '.join(order)}) is installed; install it with: "
        "pip install 'pairedge[gpu]'"
    )


def load_error_hint(error_name: str, target: str) -> str:
    """How to fix a failed module load (a driver too old for the compiled code, most often)."""
    if any(k in error_name for k in _TOO_OLD):
        return (
            f"the CUDA driver cannot load the {target} built by this NVRTC (driver too old for it); fix by "
            "updating the NVIDIA driver, installing the nvidia-cuda-nvrtc / cuda-python release that matches "
            "the driver's CUDA version, or running with flow='reference' (CPU) or flow='dis'"
        )
    return "fix by checking `pairedge doctor`, or run with flow='reference' (CPU) or flow='dis'"


class GpuApi:
    """Base of the two launch layers (see the module docstring). Not thread-safe; one per backend."""

    name = ""
    device_name = ""
    arch = 0  # compute capability as 10 * major + minor
    driver_version = 0

    def alloc(self, nbytes: int) -> int:
        raise NotImplementedError

    def host(self, nbytes: int) -> np.ndarray:
        raise NotImplementedError

    def htod(self, dst: int, src: np.ndarray) -> None:
        raise NotImplementedError

    def dtoh(self, dst: np.ndarray, src: int) -> None:
        raise NotImplementedError

    def memset0(self, dst: int, nbytes: int) -> None:
        raise NotImplementedError

    def load(self, code: bytes, target: str) -> Any:
        raise NotImplementedError

    def function(self, module: Any, name: str) -> Any:
        raise NotImplementedError

    def launch(self, fn: Any, grid: tuple[int, int], block: tuple[int, int], args: Sequence[Arg]) -> None:
        raise NotImplementedError

    def event(self) -> Any:
        raise NotImplementedError

    def record(self, ev: Any) -> None:
        raise NotImplementedError

    def elapsed_ms(self, start: Any, end: Any) -> float:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def mark(self) -> tuple[int, int]:
        raise NotImplementedError

    def release(self, mark: tuple[int, int]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    supports_graphs = False

    def activate(self) -> None:
        """Make this layer's context current in the calling thread (a pipeline may run in another thread)."""

    def begin_capture(self) -> None:
        raise BackendError(f"CUDA graphs are not supported through {self.name}")

    def end_capture(self) -> Any:
        raise BackendError(f"CUDA graphs are not supported through {self.name}")

    def graph_launch(self, graph: Any) -> None:
        raise BackendError(f"CUDA graphs are not supported through {self.name}")

    def graph_destroy(self, graph: Any) -> None:
        pass


class CudaPythonApi(GpuApi):
    """``cuda.bindings.driver`` (NVIDIA cuda-python)."""

    name = "cuda-python"

    def __init__(self, device: int = 0) -> None:
        self.drv = require("cuda.bindings.driver", purpose="the CUDA flow backend")
        self._ok(self.drv.cuInit(0), "cuInit")
        (count,) = self._ok(self.drv.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= device < count:
            raise BackendError(f"CUDA flow: device {device} requested, {count} CUDA device(s) present")
        (self.dev,) = self._ok(self.drv.cuDeviceGet(device), "cuDeviceGet")
        attr = self.drv.CUdevice_attribute
        (major,) = self._ok(
            self.drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev), "attr"
        )
        (minor,) = self._ok(
            self.drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev), "attr"
        )
        self.arch = 10 * int(major) + int(minor)
        (raw,) = self._ok(self.drv.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        self.device_name = bytes(raw).split(b"\0")[0].decode(errors="replace")
        (self.driver_version,) = self._ok(self.drv.cuDriverGetVersion(), "cuDriverGetVersion")
        (self.ctx,) = self._ok(self.drv.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self._ok(self.drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        (self.stream,) = self._ok(self.drv.cuStreamCreate(1), "cuStreamCreate")  # non-blocking
        self._device: list[Any] = []
        self._host: list[int] = []
        self._keep: list[Any] = []

    def _ok(self, result: tuple, what: str) -> tuple:  # type: ignore[type-arg]
        err = result[0]
        if err != self.drv.CUresult.CUDA_SUCCESS:
            raise BackendError(
                f"CUDA flow: {what} failed with {getattr(err, 'name', err)}; {load_error_hint(str(getattr(err, 'name', err)), 'code')}"
            )
        return tuple(result[1:])

    def alloc(self, nbytes: int) -> int:
        (ptr,) = self._ok(self.drv.cuMemAlloc(max(int(nbytes), 4)), f"cuMemAlloc({nbytes})")
        self._device.append(ptr)
        return int(ptr)

    def host(self, nbytes: int) -> np.ndarray:
        n = max(int(nbytes), 4)
        (ptr,) = self._ok(self.drv.cuMemHostAlloc(n, 0), f"cuMemHostAlloc({n})")
        self._host.append(int(ptr))
        return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(int(ptr)))

    def htod(self, dst: int, src: np.ndarray) -> None:
        self._ok(
            self.drv.cuMemcpyHtoDAsync(dst, src.ctypes.data, src.nbytes, self.stream), "cuMemcpyHtoDAsync"
        )

    def dtoh(self, dst: np.ndarray, src: int) -> None:
        self._ok(
            self.drv.cuMemcpyDtoHAsync(dst.ctypes.data, src, dst.nbytes, self.stream), "cuMemcpyDtoHAsync"
        )

    def memset0(self, dst: int, nbytes: int) -> None:
        self._ok(self.drv.cuMemsetD32Async(dst, 0, nbytes // 4, self.stream), "cuMemsetD32Async")

    def load(self, code: bytes, target: str) -> Any:
        image = np.frombuffer(code + b"\0", np.uint8).copy()
        self._keep.append(image)
        err, module = self.drv.cuModuleLoadData(image.ctypes.data)
        if err != self.drv.CUresult.CUDA_SUCCESS:
            raise BackendError(
                f"CUDA flow: loading the {target} failed with {err.name}; {load_error_hint(err.name, target)}"
            )
        return module

    def function(self, module: Any, name: str) -> Any:
        (fn,) = self._ok(self.drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        return fn

    def launch(self, fn: Any, grid: tuple[int, int], block: tuple[int, int], args: Sequence[Arg]) -> None:
        kinds = {"p": ctypes.c_uint64, "i": ctypes.c_int, "f": ctypes.c_float}
        values: list[Any] = [kinds[k](v) for k, v in args]
        params = np.array([ctypes.addressof(v) for v in values], np.uint64)
        self._ok(
            self.drv.cuLaunchKernel(
                fn, grid[0], grid[1], 1, block[0], block[1], 1, 0, self.stream, params.ctypes.data, 0
            ),
            "cuLaunchKernel",
        )

    def event(self) -> Any:
        (ev,) = self._ok(self.drv.cuEventCreate(0), "cuEventCreate")
        return ev

    def record(self, ev: Any) -> None:
        self._ok(self.drv.cuEventRecord(ev, self.stream), "cuEventRecord")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        self._ok(self.drv.cuEventSynchronize(end), "cuEventSynchronize")
        (ms,) = self._ok(self.drv.cuEventElapsedTime(start, end), "cuEventElapsedTime")
        return float(ms)

    def synchronize(self) -> None:
        self._ok(self.drv.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    supports_graphs = True

    def activate(self) -> None:
        self._ok(self.drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def begin_capture(self) -> None:
        mode = self.drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._ok(self.drv.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")

    def end_capture(self) -> Any:
        """End the capture; the instantiated graph (raises BackendError if the capture was broken)."""
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

    def mark(self) -> tuple[int, int]:
        """A point to :meth:`release` back to (frees what was allocated after it)."""
        return len(self._device), len(self._host)

    def release(self, mark: tuple[int, int]) -> None:
        for ptr in self._device[mark[0] :]:
            self.drv.cuMemFree(ptr)
        for hptr in self._host[mark[1] :]:
            self.drv.cuMemFreeHost(hptr)
        del self._device[mark[0] :], self._host[mark[1] :]

    def close(self) -> None:
        """Free every buffer, the stream, and this layer's reference to the primary context. Idempotent."""
        if self.ctx is None:  # a second release would drop a reference someone else holds
            return
        self.drv.cuCtxSetCurrent(self.ctx)
        for ptr in self._device:
            self.drv.cuMemFree(ptr)
        for ptr in self._host:
            self.drv.cuMemFreeHost(ptr)
        self._device, self._host = [], []
        self.drv.cuStreamDestroy(self.stream)
        self.drv.cuDevicePrimaryCtxRelease(self.dev)
        self.ctx = None


class PyCudaApi(GpuApi):
    """``pycuda.driver`` (the alternative launch layer; code still compiled by NVRTC)."""

    name = "pycuda"

    def __init__(self, device: int = 0) -> None:
        self.drv = require("pycuda.driver", purpose="the CUDA flow backend (pycuda launch layer)")
        try:
            self.drv.init()
            dev = self.drv.Device(device)
            self.ctx = dev.retain_primary_context()
            self.ctx.push()
            self.stream = self.drv.Stream()
        except self.drv.Error as exc:
            raise BackendError(f"CUDA flow (pycuda): {exc}; {load_error_hint(str(exc), 'code')}") from exc
        major, minor = dev.compute_capability()
        self.arch = 10 * major + minor
        self.device_name = dev.name()
        self.driver_version = self.drv.get_driver_version()
        self._keep: list[Any] = []
        self._pinned: list[np.ndarray] = []

    def alloc(self, nbytes: int) -> int:
        buf = self.drv.mem_alloc(max(int(nbytes), 4))
        self._keep.append(buf)
        return int(buf)

    def host(self, nbytes: int) -> np.ndarray:
        buf = self.drv.pagelocked_empty(max(int(nbytes), 4), np.uint8)
        self._pinned.append(buf)
        return buf

    def mark(self) -> tuple[int, int]:
        return len(self._keep), len(self._pinned)

    def release(self, mark: tuple[int, int]) -> None:
        for buf in self._keep[mark[0] :]:
            buf.free()
        del self._keep[mark[0] :], self._pinned[mark[1] :]  # page-locked memory is freed with its array

    def htod(self, dst: int, src: np.ndarray) -> None:
        self.drv.memcpy_htod_async(dst, src, self.stream)

    def dtoh(self, dst: np.ndarray, src: int) -> None:
        self.drv.memcpy_dtoh_async(dst, src, self.stream)

    def memset0(self, dst: int, nbytes: int) -> None:
        self.drv.memset_d32_async(dst, 0, nbytes // 4, self.stream)

    def load(self, code: bytes, target: str) -> Any:
        try:
            return self.drv.module_from_buffer(code + (b"\0" if target == "ptx" else b""))
        except self.drv.Error as exc:
            raise BackendError(
                f"CUDA flow: loading the {target} failed ({exc}); {load_error_hint(str(exc).upper(), target)}"
            ) from exc

    def function(self, module: Any, name: str) -> Any:
        return module.get_function(name)

    def launch(self, fn: Any, grid: tuple[int, int], block: tuple[int, int], args: Sequence[Arg]) -> None:
        kinds = {"p": np.uintp, "i": np.int32, "f": np.float32}
        fn(
            *[kinds[k](v) for k, v in args],
            block=(block[0], block[1], 1),
            grid=(grid[0], grid[1]),
            stream=self.stream,
        )

    def event(self) -> Any:
        return self.drv.Event()

    def record(self, ev: Any) -> None:
        ev.record(self.stream)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.time_till(end))

    def synchronize(self) -> None:
        self.stream.synchronize()

    def close(self) -> None:
        """Free every buffer and pop / detach the primary context. Idempotent."""
        if self.ctx is None:
            return
        self.release((0, 0))
        self.ctx.pop()
        self.ctx.detach()
        self.ctx = None


def open_api(name: str = "auto", device: int = 0) -> GpuApi:
    """A launch layer on ``device`` (see :func:`resolve_api`)."""
    return CudaPythonApi(device) if resolve_api(name) == "cuda-python" else PyCudaApi(device)


def unavailable_reason() -> str | None:
    """None when a CUDA launch layer, a driver and a GPU are usable here, else why not (no GPU is touched
    beyond cuInit / the device count)."""
    try:
        api = resolve_api("auto")
    except MissingDependencyError as exc:
        return str(exc)
    if api == "cuda-python":
        try:
            drv = importlib.import_module("cuda.bindings.driver")
            (err,) = drv.cuInit(0)
        except Exception as exc:  # DynamicLibNotFoundError when libcuda is absent
            return f"no CUDA driver (libcuda) usable here: {type(exc).__name__}: {exc}"
        if err != drv.CUresult.CUDA_SUCCESS:
            return f"cuInit failed with {err.name}: no usable NVIDIA GPU"
        err, count = drv.cuDeviceGetCount()
        if err != drv.CUresult.CUDA_SUCCESS or count == 0:
            return "no CUDA device found"
        if not _importable("cuda.bindings.nvrtc"):
            return "cuda.bindings.nvrtc is missing; install it with: pip install 'pairedge[gpu]'"
        return None
    try:
        drv = importlib.import_module("pycuda.driver")
        drv.init()
        if drv.Device.count() == 0:
            return "no CUDA device found"
    except Exception as exc:
        return f"pycuda cannot reach a GPU: {exc}"
    if not _importable("cuda.bindings.nvrtc"):
        return "the kernels are compiled with NVRTC: install it with: pip install 'pairedge[gpu]'"
    return None
