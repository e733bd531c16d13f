"""The HIP-CPU emulated device: the layer's third implementation, for tests and debugging, never a GPU.

Kernels are the real ``.cu`` files, built by :mod:`.build` and launched through ctypes with the grid, block,
shared-memory size and arguments the GPU path passes (checked by :func:`pairedge.gpu.cuda.base.check_launch`
first, as on a GPU). Memory is host memory (one address space: a device pointer is a host address), but it
is kept apart as a GPU's is, so what would fail or race on a GPU fails here too:

* device and pinned allocations are distinct; fresh memory is filled with 0xFF bytes (NaN as float) since
  a GPU's is undefined; a kernel argument must point into a live device allocation of this device, a copy
  must stay inside one and its host side must be pinned (``alloc_pinned``), a released buffer is refused;
* every stream is a queue: copies, memsets, launches and event records run in order only when the stream is
  synchronised (or an event on it is waited for), so a host buffer read before :meth:`synchronize` still
  holds its old bytes, as it would on a GPU;
* graphs record the default stream's operations between :meth:`begin_capture` and :meth:`end_capture` and
  replay them (a copy reads its pinned source when replayed, as a CUDA graph does).

Events time the host's execution of the queued work: :meth:`elapsed_ms` is emulated time, never a GPU time.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pairedge.core.errors import BackendError, DeviceUnavailableError
from pairedge.gpu.cuda.base import Arg, Device, DeviceInfo, Kernel
from pairedge.gpu.cuda.emulated.build import PREFIX, build_library
from pairedge.gpu.cuda.emulated.toolchain import Toolchain, find_toolchain

_CTYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int, "f": ctypes.c_float}
_LIBRARIES: dict[Path, ctypes.CDLL] = {}  # loaded once per process (a library cannot be unloaded safely)
_RUN_LOCK = threading.Lock()  # one grid at a time: HIP-CPU keeps per-thread tile state
ALIGN = 256


@dataclass
class _Op:
    run: Callable[[], object]
    ranges: tuple[tuple[int, int], ...]  # device (address, bytes) it touches; re-checked when it runs
    what: str


@dataclass
class _Stream:
    handle: int
    ops: list[_Op] = field(default_factory=list)


@dataclass
class _Event:
    time: float | None = None
    stream: _Stream | None = None


@dataclass
class _Graph:
    ops: list[_Op]


class EmulatedDevice(Device):
    """Kernels of CUDA C files executed on the CPU by HIP-CPU (see the module docstring)."""

    kind = "hip-cpu"
    emulated = True
    supports_graphs = True

    def __init__(self, device: int = 0) -> None:
        if device != 0:
            raise DeviceUnavailableError(f"the emulated CUDA device has one device (0), {device} requested")
        self.toolchain: Toolchain | None = None  # found when the first module is loaded: memory needs none
        self.info = DeviceInfo(
            0, f"HIP-CPU emulated device ({os.cpu_count()} CPU threads)", "0.0", "emulated"
        )
        self._blocks: dict[int, tuple[np.ndarray, int, str]] = {}  # address -> (owner array, bytes, kind)
        self._starts: list[int] = []
        self._order: list[int] = []
        self._streams: list[_Stream] = []
        self._capture: list[_Op] | None = None
        self._closed = False
        #: kernel launches asked for (including captured ones) / grids executed, by kernel name.
        self.launches: Counter[str] = Counter()
        self.executed: Counter[str] = Counter()
        self.replays = 0
        #: seconds g++ spent building modules for this device (0 when every library came from the cache).
        self.build_seconds = 0.0
        self.stream = self.create_stream()

    # -- memory -----------------------------------------------------------------------------------------
    def _allocate(self, nbytes: int, kind: str) -> tuple[int, np.ndarray]:
        if self._closed:
            raise BackendError("emulated device: used after close()")
        raw = np.empty(nbytes + ALIGN, np.uint8)
        start = (-raw.ctypes.data) % ALIGN
        view = raw[start : start + nbytes]
        view.fill(0xFF)  # undefined on a GPU; NaN as float here
        address = view.ctypes.data
        self._blocks[address] = (raw, nbytes, kind)
        bisect.insort(self._starts, address)
        self._order.append(address)
        return address, view

    def alloc_device(self, nbytes: int) -> int:
        return self._allocate(max(int(nbytes), 4), "device")[0]

    def alloc_pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        _, view = self._allocate(max(count * dt.itemsize, 1), "pinned")
        return view[: count * dt.itemsize].view(dt).reshape(shape)

    def mark(self) -> int:
        return len(self._order)

    def release(self, mark: int) -> None:
        for address in self._order[mark:]:
            del self._blocks[address]
            self._starts.remove(address)
        del self._order[mark:]

    def live(self) -> dict[str, int]:
        """Live allocations by kind (``{"device": n, "pinned": m}``): everything is freed after close()."""
        return dict(Counter(kind for _, _, kind in self._blocks.values()))

    def _inside(self, address: int, nbytes: int, kind: str) -> bool:
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0:
            return False
        start = self._starts[i]
        _, size, got = self._blocks[start]
        return got == kind and address + max(nbytes, 1) <= start + size

    def _check_device(self, address: int, nbytes: int, what: str) -> None:
        if not self._inside(int(address), int(nbytes), "device"):
            raise BackendError(
                f"emulated device: {what}: {nbytes} bytes at {int(address):#x} are not inside a live "
                "device allocation of this device (released, host memory, or too small); a GPU "
                "would fault or corrupt memory here"
            )

    def _check_host(self, host: np.ndarray, what: str) -> None:
        if not (isinstance(host, np.ndarray) and host.flags.c_contiguous):
            raise BackendError(f"emulated device: {what}: the host side must be a C-contiguous numpy array")
        if not self._inside(host.ctypes.data, host.nbytes, "pinned"):
            raise BackendError(
                f"emulated device: {what}: the host array is not pinned memory of this device "
                "(allocate it with alloc_pinned); a GPU would not copy it asynchronously"
            )

    # -- streams, copies, events -----------------------------------------------------------------------
    def create_stream(self) -> _Stream:
        stream = _Stream(0x5100 + len(self._streams))
        self._streams.append(stream)
        return stream

    def stream_handle(self, stream: Any) -> int:
        return int(stream.handle)

    def _enqueue(self, op: _Op, stream: Any) -> None:
        if self._closed:
            raise BackendError("emulated device: used after close()")
        target = self.stream if stream is None else stream
        if self._capture is not None and target is self.stream:
            self._capture.append(op)
        else:
            target.ops.append(op)

    def _execute(self, op: _Op) -> None:
        for address, nbytes in op.ranges:
            self._check_device(address, nbytes, op.what)
        op.run()

    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any = None) -> None:
        self._check_host(host, "htod_async")
        n, src = host.nbytes, host.ctypes.data
        self._check_device(device_ptr, n, "htod_async")
        keep = host  # the op holds the array: its memory lives until the copy ran
        self._enqueue(
            _Op(
                lambda: ctypes.memmove(device_ptr, keep.ctypes.data, n),
                ((device_ptr, n),),
                f"htod_async of {n} bytes from {src:#x}",
            ),
            stream,
        )

    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any = None) -> None:
        self._check_host(host, "dtoh_async")
        n, keep = host.nbytes, host
        self._check_device(device_ptr, n, "dtoh_async")
        self._enqueue(
            _Op(
                lambda: ctypes.memmove(keep.ctypes.data, device_ptr, n),
                ((device_ptr, n),),
                f"dtoh_async of {n} bytes",
            ),
            stream,
        )

    def memset_async(self, device_ptr: int, nbytes: int, stream: Any = None) -> None:
        if nbytes % 4:
            raise BackendError(
                f"emulated device: memset_async of {nbytes} bytes: a multiple of 4 (cuMemsetD32)"
            )
        self._check_device(device_ptr, nbytes, "memset_async")
        self._enqueue(
            _Op(
                lambda: ctypes.memset(device_ptr, 0, nbytes),
                ((device_ptr, nbytes),),
                f"memset_async of {nbytes} bytes",
            ),
            stream,
        )

    def host_function(self, fn: Callable[[], None], stream: Any = None) -> None:
        """Queue a Python callable on the stream (``cuLaunchHostFunc``): it runs in stream order."""
        self._enqueue(_Op(fn, (), "host function"), stream)

    def synchronize(self, stream: Any = None) -> None:
        target = self.stream if stream is None else stream
        while target.ops:
            self._execute(target.ops.pop(0))

    def event(self) -> _Event:
        return _Event()

    def record(self, event: Any, stream: Any = None) -> None:
        target = self.stream if stream is None else stream

        def stamp() -> None:
            event.time = time.perf_counter()

        event.stream, event.time = target, None
        self._enqueue(_Op(stamp, (), "event record"), target)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        for ev in (start, end):
            if ev.stream is None:
                raise BackendError("emulated device: elapsed_ms of an event that was never recorded")
            self.synchronize(ev.stream)
        return (end.time - start.time) * 1000.0

    # -- code -------------------------------------------------------------------------------------------
    def _load(self, name: str, source: str) -> tuple[Any, str, str]:
        if self.toolchain is None:
            self.toolchain, why = find_toolchain()
            if self.toolchain is None:
                raise DeviceUnavailableError(f"the emulated CUDA device (hip-cpu) cannot build {name}: {why}")
        path, how, seconds = build_library(name, source, self.toolchain)
        self.build_seconds += seconds
        if path in _LIBRARIES:
            how = "memory"
        else:
            _LIBRARIES[path] = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        return _LIBRARIES[path], how, f"hip-cpu (g++ {self.toolchain.cxx_version})"

    def _function(self, module: Any, name: str) -> Any:
        return getattr(module, PREFIX + name)

    def _launch(
        self,
        kernel: Kernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        args: Sequence[Arg],
        stream: Any,
    ) -> None:
        pointers = tuple((int(v), 1) for k, v in args if k == "p")
        for address, _ in pointers:
            self._check_device(address, 1, f"argument of {kernel.name}")
        fn = kernel.handle
        if fn.argtypes is None:  # the wrapper's C signature: the config, then the kernel's own parameters
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.POINTER(ctypes.c_uint), *(_CTYPES[p.kind] for p in kernel.signature.params)]
        config = (ctypes.c_uint * 7)(*grid, *block, shared)
        values = [v for _, v in args]
        name = kernel.name

        def run() -> None:
            with _RUN_LOCK:
                rc = fn(config, *values)
            if rc != 0:
                raise BackendError(f"emulated device: {name} returned {rc}")
            self.executed[name] += 1

        self.launches[name] += 1
        self._enqueue(_Op(run, pointers, f"launch of {name}"), stream)

    # -- graphs, lifetime -----------------------------------------------------------------------------------
    def begin_capture(self) -> None:
        if self._capture is not None:
            raise BackendError("emulated device: a capture is already running")
        self._capture = []

    def end_capture(self) -> _Graph:
        if self._capture is None:
            raise BackendError("emulated device: end_capture without begin_capture")
        ops, self._capture = self._capture, None
        return _Graph(ops)

    def graph_launch(self, graph: Any) -> None:
        self.replays += 1
        for op in graph.ops:
            self._enqueue(op, None)

    def close(self) -> None:
        if self._closed:
            return
        try:
            for stream in self._streams:  # as a context teardown, queued work finishes first
                self.synchronize(stream)
        finally:
            self.release(0)
            self._streams, self._capture, self._closed = [], None, True
