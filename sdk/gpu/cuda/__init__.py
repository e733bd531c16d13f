"""The one CUDA layer: every use of a GPU in pairedge goes through :class:`Device` (Polygraphy's
``polygraphy/cuda`` role). The CUDA optical flow, the native TensorRT backend and ``pairedge doctor`` use it;
no other module imports ``cuda-python`` or ``pycuda``.

Implementations (``kind``):

* ``"cuda-python"`` (:mod:`.driver`): NVIDIA's ``cuda.bindings`` driver API; kernels compiled by NVRTC.
* ``"pycuda"`` (:mod:`.pycuda_device`): the alternative where pycuda is what the user has.
* ``"hip-cpu"`` (:mod:`.emulated`): the emulated device: the same ``.cu`` files built with HIP-CPU and g++
  and executed on the CPU, for tests and debugging. Never chosen silently: only ``kind="hip-cpu"`` or
  ``PAIREDGE_CUDA_EMULATION=hip-cpu`` (which ``"auto"`` honours where ``emulation=True``) select it, a
  warning says so when it opens, and every device, result and summary it produces says "emulated".

``"auto"``: the emulated device when ``PAIREDGE_CUDA_EMULATION=hip-cpu`` is set (and allowed), else
cuda-python, else pycuda. Nothing here imports a CUDA package at module level.
"""

from __future__ import annotations

import logging

from pairedge.core.errors import InputError, MissingDependencyError
from pairedge.core.optional import install_hint
from pairedge.gpu.cuda.base import Arg, BlockRule, Device, DeviceInfo, Kernel, Limits, Module
from pairedge.gpu.cuda.driver import CudaPythonDevice
from pairedge.gpu.cuda.emulated.device import EmulatedDevice
from pairedge.gpu.cuda.emulated.toolchain import unavailable_reason as emulated_reason
from pairedge.gpu.cuda.pycuda_device import PyCudaDevice
from pairedge.gpu.cuda.status import BINDINGS, EMULATION_ENV, cuda_devices, emulation_setting, importable

KINDS: tuple[str, ...] = ("auto", "cuda-python", "pycuda", "hip-cpu")
GPU_KINDS: tuple[str, ...] = ("cuda-python", "pycuda")
_DRIVERS = {"cuda-python": "cuda.bindings.driver", "pycuda": "pycuda.driver"}
LOG = logging.getLogger("pairedge.gpu.cuda")


def emulation_requested() -> bool:
    """Whether ``PAIREDGE_CUDA_EMULATION`` asks for the emulated device ("hip-cpu"; unset / "" / "0" / "off"
    mean no). Raises InputError for any other value."""
    selected, wrong = emulation_setting()
    if wrong:
        raise InputError(wrong)
    return selected


def binding_reason() -> str | None:
    """None when cuda-python or pycuda imports, else why not and how to install it (no GPU touched)."""
    if any(importable(_DRIVERS[k]) for k in GPU_KINDS):
        return None
    return f"neither cuda-python nor pycuda is installed; install it with: {install_hint('cuda')}"


def resolve_kind(kind: str = "auto", *, emulation: bool = True) -> str:
    """The implementation ``kind`` names (see the module docstring).

    Args:
        emulation: whether the caller can run on the emulated device (TensorRT engines cannot).

    Raises:
        InputError: an unknown kind, or "hip-cpu" where emulation is not allowed.
        MissingDependencyError: "auto" and neither binding is installed.
    """
    if kind not in KINDS:
        raise InputError(f"CUDA layer: expected one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "hip-cpu" and not emulation:
        raise InputError(
            "the emulated CUDA device (hip-cpu) cannot run this (a TensorRT engine needs a GPU); "
            "pass it as an injected device in tests only"
        )
    if kind != "auto":
        return kind
    if emulation and emulation_requested():
        return "hip-cpu"
    for candidate in GPU_KINDS:
        if importable(_DRIVERS[candidate]):
            return candidate
    hint = (
        f" (for tests and debugging without a GPU: {EMULATION_ENV}=hip-cpu runs the kernels emulated on "
        "the CPU)"
        if emulation
        else ""
    )
    raise MissingDependencyError(
        f"the CUDA layer needs cuda-python or pycuda, neither is importable; install it "
        f"with: {install_hint('cuda')}{hint}"
    )


def open_device(kind: str = "auto", device: int = 0, *, emulation: bool = True) -> Device:
    """A :class:`Device` of ``kind`` on ordinal ``device`` (see :func:`resolve_kind`).

    Raises:
        MissingDependencyError: the binding is not installed. DeviceUnavailableError: no usable GPU (or, for
        "hip-cpu", no HIP-CPU / g++ / TBB). InputError: an unknown kind.
    """
    resolved = resolve_kind(kind, emulation=emulation)
    if resolved == "hip-cpu":
        emulated = EmulatedDevice(device)
        LOG.warning(
            "pairedge: CUDA runs on the EMULATED device (HIP-CPU on the CPU%s): results are emulated, "
            "timings are not GPU timings",
            f", {EMULATION_ENV}=hip-cpu" if kind == "auto" else "",
        )
        return emulated
    if resolved == "cuda-python":
        return CudaPythonDevice(device)

    return PyCudaDevice(device)


def unavailable_reason(kind: str = "auto", *, emulation: bool = True, need_nvrtc: bool = True) -> str | None:
    """None when :func:`open_device` would find a usable device of ``kind`` (GPU kinds: the binding, a driver,
    a GPU and, with ``need_nvrtc``, NVRTC; "hip-cpu": its toolchain), else why not. Opens no device."""
    try:
        resolved = resolve_kind(kind, emulation=emulation)
    except (InputError, MissingDependencyError) as exc:
        return str(exc)
    if resolved == "hip-cpu":
        why = emulated_reason()
        return None if why is None else f"the emulated CUDA device (hip-cpu) is not usable here: {why}"
    if not importable(_DRIVERS[resolved]):
        return f"{resolved} is not installed; install it with: {install_hint('cuda')}"

    devices, why = cuda_devices()
    if not devices:
        return why
    if need_nvrtc and not importable("cuda.bindings.nvrtc"):
        return (
            "the kernels are compiled with NVRTC (cuda.bindings.nvrtc), missing; install it with: "
            f"{install_hint('cuda')}"
        )
    return None


__all__ = [
    "BINDINGS",
    "EMULATION_ENV",
    "GPU_KINDS",
    "KINDS",
    "Arg",
    "BlockRule",
    "Device",
    "DeviceInfo",
    "Kernel",
    "Limits",
    "Module",
    "binding_reason",
    "emulation_requested",
    "open_device",
    "resolve_kind",
    "unavailable_reason",
]
