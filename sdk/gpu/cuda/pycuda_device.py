"""The layer on ``pycuda.driver`` (the alternative where pycuda is what the user has; code still compiled by
NVRTC through :mod:`.nvrtc`). The device's primary context is pushed for the instance's lifetime."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pairedge.core.errors import BackendError, DeviceUnavailableError
from pairedge.core.optional import require
from pairedge.gpu.cuda.base import Arg, Device, DeviceInfo, Kernel, Limits
from pairedge.gpu.cuda.driver import version_text
from pairedge.gpu.cuda.nvrtc import build_for, load_error_hint

_NUMPY = {"p": np.uintp, "i": np.int32, "f": np.float32}


class PyCudaDevice(Device):
    """``pycuda.driver`` on device ``device`` (``driver``: an injected module, for tests)."""

    kind = "pycuda"

    def __init__(self, device: int = 0, driver: Any = None) -> None:
        self.drv = (
            driver
            if driver is not None
            else require("pycuda.driver", extra="gpu", purpose="the pycuda CUDA layer")
        )
        self.ctx = None
        try:
            self.drv.init()
            self._dev = self.drv.Device(device)
            self.ctx = self._dev.retain_primary_context()
            self.ctx.push()
        except Exception as exc:  # pycuda raises pycuda.driver.Error subclasses
            raise DeviceUnavailableError(
                f"CUDA device {device} is not usable through pycuda ({exc})"
            ) from None
        major, minor = self._dev.compute_capability()
        version = int(self.drv.get_driver_version())
        self.info = DeviceInfo(device, str(self._dev.name()), f"{major}.{minor}", version_text(version))
        attrs = getattr(self.drv, "device_attribute", None)
        if attrs is not None:
            a = lambda name: int(self._dev.get_attribute(getattr(attrs, name)))  # noqa: E731
            self.limits = Limits(
                a("MAX_THREADS_PER_BLOCK"),
                (a("MAX_BLOCK_DIM_X"), a("MAX_BLOCK_DIM_Y"), a("MAX_BLOCK_DIM_Z")),
                (a("MAX_GRID_DIM_X"), a("MAX_GRID_DIM_Y"), a("MAX_GRID_DIM_Z")),
                a("MAX_SHARED_MEMORY_PER_BLOCK"),
            )
        self._buffers: list[Any] = []
        self._pinned: list[np.ndarray] = []
        self._streams: list[Any] = []
        self.stream = self.create_stream()

    def _s(self, stream: Any) -> Any:
        return self.stream if stream is None else stream

    def alloc_device(self, nbytes: int) -> int:
        buf = self.drv.mem_alloc(max(int(nbytes), 4))
        self._buffers.append(buf)
        return int(buf)

    def alloc_pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        arr = self.drv.pagelocked_empty(shape, np.dtype(dtype))
        self._pinned.append(arr)
        return arr

    def mark(self) -> tuple[int, int]:
        return len(self._buffers), len(self._pinned)

    def release(self, mark: tuple[int, int]) -> None:
        for buf in self._buffers[mark[0] :]:
            buf.free()
        del self._buffers[mark[0] :], self._pinned[mark[1] :]  # page-locked memory is freed with its array

    def create_stream(self) -> Any:
        stream = self.drv.Stream()
        self._streams.append(stream)
        return stream

    def stream_handle(self, stream: Any) -> int:
        return int(stream.handle)

    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any = None) -> None:
        self.drv.memcpy_htod_async(device_ptr, host, self._s(stream))

    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any = None) -> None:
        self.drv.memcpy_dtoh_async(host, device_ptr, self._s(stream))

    def memset_async(self, device_ptr: int, nbytes: int, stream: Any = None) -> None:
        self.drv.memset_d32_async(device_ptr, 0, nbytes // 4, self._s(stream))

    def synchronize(self, stream: Any = None) -> None:
        self._s(stream).synchronize()

    def event(self) -> Any:
        return self.drv.Event()

    def record(self, event: Any, stream: Any = None) -> None:
        event.record(self._s(stream))

    def elapsed_ms(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.time_till(end))

    def _load(self, name: str, source: str) -> tuple[Any, str, str]:
        code, how, target = build_for(name, source, self.info.arch)
        try:
            module = self.drv.module_from_buffer(code + (b"\0" if target.kind == "ptx" else b""))
        except self.drv.Error as exc:
            raise BackendError(
                f"CUDA: loading the {target.kind} of {name} failed ({exc}); "
                f"{load_error_hint(str(exc).upper(), target.kind)}"
            ) from exc
        return module, how, f"{target.kind} {target.arch}"

    def _function(self, module: Any, name: str) -> Any:
        return module.get_function(name)

    def _launch(
        self,
        kernel: Kernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        args: Sequence[Arg],
        stream: Any,
    ) -> None:
        kernel.handle(
            *[_NUMPY[k](v) for k, v in args], block=block, grid=grid, shared=shared, stream=self._s(stream)
        )

    def close(self) -> None:
        if self.ctx is None:
            return
        for stream in self._streams:
            stream.synchronize()
        self.release((0, 0))
        self._streams, self.stream = [], None
        self.ctx.pop()
        self.ctx.detach()
        self.ctx = None
