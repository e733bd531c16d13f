"""The one CUDA interface (:class:`Device`) and the launch checks every implementation shares.

A :class:`Device` is one GPU (or the emulated one) with a default stream: device and pinned host memory,
asynchronous copies, streams, events, modules compiled from CUDA C source, kernel launches, optional graphs,
and :meth:`Device.close`, which frees everything the instance made. :meth:`Device.launch` refuses before the
driver is called what a GPU refuses (more than 1024 threads in a block, a dimension over the device's limit,
more shared memory than a block may use, a block a kernel's code cannot take, arguments that do not match the
kernel's parameters), so all three implementations fail the same way with a message that says what to change.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pairedge.core.errors import BackendError
from pairedge.gpu.cuda.source import KINDS, KernelSignature, parse_kernels

Arg = tuple[str, Any]
"""A kernel argument: ``("p", device_pointer) | ("i", int) | ("f", float)``."""


@dataclass(frozen=True)
class DeviceInfo:
    """The device a layer runs on.

    Attributes:
        index: device ordinal; name: as the driver reports it ("Orin", "NVIDIA H200").
        compute_capability: "major.minor", e.g. "8.7" ("0.0" for the emulated device).
        cuda_version: the driver's CUDA version, "major.minor" (the emulated device says "emulated").
    """

    index: int
    name: str
    compute_capability: str
    cuda_version: str

    @property
    def arch(self) -> int:
        """Compute capability as ``10 * major + minor`` (87 for an Orin)."""
        major, _, minor = self.compute_capability.partition(".")
        return 10 * int(major) + int(minor or 0)


@dataclass(frozen=True)
class Limits:
    """What one launch may ask of the device (defaults: every CUDA GPU since compute capability 3.0)."""

    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_per_block: int = 48 * 1024


@dataclass(frozen=True)
class BlockRule:
    """What a kernel's code needs of its block beyond the device's limits (``box_moments`` reduces in shared
    memory over ``blockDim.x`` threads: a power of two, at most 256, one-dimensional)."""

    max_threads: int | None = None
    power_of_two: bool = False
    one_dimensional: bool = False


@dataclass(frozen=True)
class Kernel:
    """A kernel of a loaded :class:`Module`: its driver handle, parameters and block rule."""

    signature: KernelSignature
    handle: Any
    rule: BlockRule = BlockRule()

    @property
    def name(self) -> str:
        return self.signature.name


class Module:
    """Code compiled from one CUDA C source and loaded on a device; ``how`` says where the code came from
    ("nvrtc", "disk", "memory" for NVRTC; "g++", "disk", "memory" for the emulated device)."""

    def __init__(self, device: Device, name: str, source: str, handle: Any, how: str, target: str) -> None:
        self.device, self.name, self.handle, self.how, self.target = device, name, handle, how, target
        self.signatures = parse_kernels(source)

    def function(self, name: str, rule: BlockRule | None = None) -> Kernel:
        """The kernel ``name`` of this module (with the block ``rule`` its code needs)."""
        if name not in self.signatures:
            raise BackendError(
                f"{self.name}: no __global__ kernel {name!r}; it has {sorted(self.signatures)}"
            )
        return Kernel(self.signatures[name], self.device._function(self.handle, name), rule or BlockRule())


def dims3(dims: Sequence[int], what: str) -> tuple[int, int, int]:
    """``(x,)``, ``(x, y)`` or ``(x, y, z)`` -> ``(x, y, z)`` with the missing ones 1."""
    values = tuple(int(d) for d in dims)
    if not 1 <= len(values) <= 3:
        raise BackendError(f"launch: {what} needs 1 to 3 dimensions, got {values}")
    return (*values, *(1,) * (3 - len(values)))  # type: ignore[return-value]


def _check_dims(name: str, g: tuple[int, int, int], b: tuple[int, int, int], limits: Limits) -> None:
    threads = b[0] * b[1] * b[2]
    if min(g) < 1 or min(b) < 1:
        raise BackendError(f"launch {name}: grid {g} and block {b} must be at least 1 in every dimension")
    if threads > limits.max_threads_per_block:
        raise BackendError(
            f"launch {name}: block {b} has {threads} threads, the device allows at most "
            f"{limits.max_threads_per_block} per block; use a smaller block"
        )
    for axis, (got, top, what) in enumerate(
        zip((*b, *g), (*limits.max_block, *limits.max_grid), ("block",) * 3 + ("grid",) * 3, strict=True)
    ):
        if got > top:
            raise BackendError(
                f"launch {name}: {what} dimension {'xyz'[axis % 3]} is {got}, the device allows at most {top}"
            )


def _check_rule(name: str, b: tuple[int, int, int], rule: BlockRule) -> None:
    threads = b[0] * b[1] * b[2]
    if rule.max_threads is not None and threads > rule.max_threads:
        raise BackendError(
            f"launch {name}: block {b} has {threads} threads, this kernel's code takes at most "
            f"{rule.max_threads}"
        )
    if rule.power_of_two and threads & (threads - 1):
        raise BackendError(
            f"launch {name}: block {b} has {threads} threads, this kernel's reduction needs a "
            "power of two (e.g. 128 or 256)"
        )
    if rule.one_dimensional and (b[1], b[2]) != (1, 1):
        raise BackendError(f"launch {name}: block {b}: this kernel uses threadIdx.x only; use (n, 1, 1)")


def _check_args(kernel: Kernel, shared: int, args: Sequence[Arg], limits: Limits) -> None:
    name, signature = kernel.name, kernel.signature
    if shared < 0 or signature.static_shared + int(shared) > limits.max_shared_per_block:
        raise BackendError(
            f"launch {name}: {signature.static_shared} bytes of static and {shared} of "
            f"dynamic shared memory, the device allows {limits.max_shared_per_block} per block"
        )
    if len(args) != len(signature.params):
        raise BackendError(
            f"launch {name}: {len(args)} arguments for the {len(signature.params)} parameters "
            f"({signature.declaration()})"
        )
    for k, ((kind, _), param) in enumerate(zip(args, signature.params, strict=True)):
        if kind not in KINDS or kind != param.kind:
            raise BackendError(
                f"launch {name}: argument {k} ({param.ctype} {param.name}) takes kind "
                f"{param.kind!r}, got {kind!r}"
            )


def check_launch(
    kernel: Kernel,
    grid: Sequence[int],
    block: Sequence[int],
    shared: int,
    args: Sequence[Arg],
    limits: Limits,
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Refuse what a GPU refuses, before the driver is called: the device's block, grid and shared-memory
    limits, the block rule of the kernel's code, arguments that do not match its parameters. Returns the
    3-D grid and block.

    Raises:
        BackendError: naming the kernel, what was asked, the limit, and what to change.
    """
    g, b = dims3(grid, "the grid"), dims3(block, "the block")
    _check_dims(kernel.name, g, b, limits)
    _check_rule(kernel.name, b, kernel.rule)
    _check_args(kernel, shared, args, limits)
    return g, b


class Device(ABC):
    """One device and its default stream (see the module docstring). Not thread-safe: one per user.

    ``stream`` arguments default to the device's own stream (:attr:`stream`). Copies are asynchronous: a
    host buffer written by :meth:`dtoh_async` is complete only after :meth:`synchronize` (or after
    :meth:`elapsed_ms` of an event recorded after the copy).
    """

    kind: ClassVar[str] = ""
    #: True only for the HIP-CPU emulated device (results are computed on the CPU, timings are not GPU ones).
    emulated: ClassVar[bool] = False
    supports_graphs: ClassVar[bool] = False
    info: DeviceInfo
    limits: Limits = Limits()
    stream: Any = None

    def device_info(self) -> DeviceInfo:
        """Name, compute capability and CUDA version of the device."""
        return self.info

    # -- memory -----------------------------------------------------------------------------------------
    @abstractmethod
    def alloc_device(self, nbytes: int) -> int:
        """A device allocation of ``nbytes`` (contents undefined); returns its address."""

    @abstractmethod
    def alloc_pinned(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A page-locked host array of ``shape`` and ``dtype`` (contents undefined)."""

    @abstractmethod
    def mark(self) -> Any:
        """A point to :meth:`release` back to."""

    @abstractmethod
    def release(self, mark: Any) -> None:
        """Free every device and pinned allocation made after ``mark``."""

    # -- streams, copies, events -----------------------------------------------------------------------
    @abstractmethod
    def create_stream(self) -> Any:
        """A new stream, owned (and destroyed) by this device."""

    @abstractmethod
    def stream_handle(self, stream: Any) -> int:
        """The ``cudaStream_t`` as an int (what ``IExecutionContext.execute_async_v3`` takes)."""

    @abstractmethod
    def htod_async(self, device_ptr: int, host: np.ndarray, stream: Any = None) -> None:
        """Queue a copy of the C-contiguous pinned ``host`` array (all its bytes) to ``device_ptr``."""

    @abstractmethod
    def dtoh_async(self, host: np.ndarray, device_ptr: int, stream: Any = None) -> None:
        """Queue a copy of ``host.nbytes`` bytes from ``device_ptr`` into the pinned ``host`` array."""

    @abstractmethod
    def memset_async(self, device_ptr: int, nbytes: int, stream: Any = None) -> None:
        """Queue zeroing ``nbytes`` (a multiple of 4) at ``device_ptr``."""

    @abstractmethod
    def synchronize(self, stream: Any = None) -> None:
        """Wait until the stream's queued work has finished."""

    @abstractmethod
    def event(self) -> Any:
        """A timing event."""

    @abstractmethod
    def record(self, event: Any, stream: Any = None) -> None:
        """Queue ``event`` on the stream."""

    @abstractmethod
    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events (waits for ``end``)."""

    # -- code -------------------------------------------------------------------------------------------
    def load_module(self, name: str, source: str) -> Module:
        """Compile CUDA C ``source`` (file name ``name``, e.g. "lk.cu") for this device and load it.

        Raises:
            BackendError: the compiler's log, or why the driver refused the code and how to fix it.
        """
        handle, how, target = self._load(name, source)
        return Module(self, name, source, handle, how, target)

    def launch(
        self,
        kernel: Kernel,
        grid: Sequence[int],
        block: Sequence[int],
        args: Sequence[Arg],
        *,
        shared: int = 0,
        stream: Any = None,
    ) -> None:
        """Queue ``kernel`` on a ``grid`` of ``block``-sized blocks with ``shared`` bytes of dynamic shared
        memory (checked first, see :func:`check_launch`)."""
        g, b = check_launch(kernel, grid, block, shared, args, self.limits)
        self._launch(kernel, g, b, int(shared), args, stream)

    @abstractmethod
    def _load(self, name: str, source: str) -> tuple[Any, str, str]:
        """(module handle, how the code was obtained, target description)."""

    @abstractmethod
    def _function(self, module: Any, name: str) -> Any:
        """The driver handle of kernel ``name`` in ``module``."""

    @abstractmethod
    def _launch(
        self,
        kernel: Kernel,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shared: int,
        args: Sequence[Arg],
        stream: Any,
    ) -> None:
        """Queue a checked launch."""

    # -- graphs, context, lifetime ------------------------------------------------------------------------
    def activate(self) -> None:  # noqa: B027 (optional: only context-based implementations need it)
        """Make this device's context current in the calling thread (a pipeline may run in another)."""

    def begin_capture(self) -> None:
        """Start recording the default stream's work into a graph."""
        raise BackendError(f"CUDA graphs are not supported through {self.kind}")

    def end_capture(self) -> Any:
        """Stop recording; the executable graph (raises BackendError if the capture broke)."""
        raise BackendError(f"CUDA graphs are not supported through {self.kind}")

    def graph_launch(self, graph: Any) -> None:
        """Queue a captured graph on the default stream."""
        raise BackendError(f"CUDA graphs are not supported through {self.kind}")

    def graph_destroy(self, graph: Any) -> None:  # noqa: B027 (nothing to free without graph support)
        """Free a captured graph."""

    @abstractmethod
    def close(self) -> None:
        """Free every buffer, stream, event, module and graph this device made, and its context.
        Idempotent."""

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        tag = ", emulated" if self.emulated else ""
        return f"{type(self).__name__}({self.info.name!r}, sm_{self.info.arch}{tag})"
