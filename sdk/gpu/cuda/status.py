"""What of the CUDA layer is usable here, without opening a device: the rows ``pairedge doctor`` prints.

The driver and its GPUs are read through ``libcuda`` with ctypes (no Python CUDA package needed, so the
doctor names the GPU even before cuda-python is installed); the bindings by importing them; the emulated
device by its toolchain (:mod:`pairedge.gpu.cuda.emulated.toolchain`, nothing compiled).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata as md
import os

from pairedge.gpu.cuda.emulated.toolchain import find_toolchain

#: binding name -> (module imported, distributions whose version is reported)
BINDINGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cuda-python": ("cuda.bindings", ("cuda-python", "cuda-bindings")),
    "pycuda": ("pycuda", ("pycuda",)),
}
EMULATION_ENV = "PAIREDGE_CUDA_EMULATION"


def importable(module: str) -> bool:
    """Whether ``module`` imports (a binding that fails to load its libraries counts as absent)."""
    try:
        importlib.import_module(module)
    except Exception:  # ImportError, or a broken install raising anything else
        return False
    return True


def binding_check(kind: str) -> tuple[bool, str]:
    """(installed, version or why not) of the ``cuda-python`` or ``pycuda`` binding."""
    module, dists = BINDINGS[kind]
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # a broken install must not crash the probe
        return False, f"not installed ({type(exc).__name__})"
    version = getattr(mod, "__version__", None)
    for dist in dists:
        if version:
            break
        try:
            version = md.version(dist)
        except md.PackageNotFoundError:
            continue
    return True, str(version or "unknown version")


def _libcuda() -> tuple[ctypes.CDLL | None, str]:
    """The initialised CUDA driver library, or None and why not."""
    for lib in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            cuda = ctypes.CDLL(lib)
            break
        except OSError:
            continue
    else:
        return None, "no CUDA driver (libcuda) found: no NVIDIA GPU usable here"
    if cuda.cuInit(0) != 0:
        return None, "libcuda found but cuInit failed: no usable GPU"
    return cuda, ""


def _devices(cuda: ctypes.CDLL) -> list[tuple[str, str]]:
    count = ctypes.c_int(0)
    cuda.cuDeviceGetCount(ctypes.byref(count))
    devices = []
    for i in range(count.value):
        dev = ctypes.c_int(0)
        cuda.cuDeviceGet(ctypes.byref(dev), i)
        buf = ctypes.create_string_buffer(256)
        cuda.cuDeviceGetName(buf, 256, dev)
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
        cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
        devices.append((buf.value.decode(errors="replace"), f"{major.value}.{minor.value}"))
    return devices


def cuda_devices() -> tuple[list[tuple[str, str]], str | None]:
    """``([(name, "major.minor"), ...], None)`` for the GPUs the driver sees, or ``([], why there is
    none)``."""
    cuda, reason = _libcuda()
    if cuda is None:
        return [], reason
    devices = _devices(cuda)
    return (devices, None) if devices else ([], "CUDA driver present, no GPU")


def driver_check() -> tuple[bool, str]:
    """(a GPU is usable, "driver CUDA 13.0; NVIDIA H200 (sm_90)" or why not)."""
    cuda, reason = _libcuda()
    devices = [] if cuda is None else _devices(cuda)
    if cuda is None or not devices:
        return False, reason or "CUDA driver present, no GPU"
    version = ctypes.c_int(0)
    cuda.cuDriverGetVersion(ctypes.byref(version))
    v = version.value
    names = ", ".join(f"{name} (sm_{cc.replace('.', '')})" for name, cc in devices)
    return True, f"driver CUDA {v // 1000}.{(v % 1000) // 10}; {names}"


def emulation_setting() -> tuple[bool, str]:
    """(``PAIREDGE_CUDA_EMULATION`` asks for the emulated device, "" or what is wrong with its value)."""
    value = os.environ.get(EMULATION_ENV, "").strip().lower()
    if value in ("", "0", "off", "no", "none", "false"):
        return False, ""
    if value == "hip-cpu":
        return True, ""
    return False, f"{EMULATION_ENV}={value!r}: expected 'hip-cpu' (the emulated CUDA device) or unset"


def emulation_check() -> tuple[bool, str]:
    """(the emulated device can be built here, what it uses and how it is selected, or why not)."""
    selected, wrong = emulation_setting()
    toolchain, why = find_toolchain()
    if toolchain is None:
        return False, why + (f"; {wrong}" if wrong else "")
    how = wrong or (
        f"SELECTED by {EMULATION_ENV}=hip-cpu: flow='cuda' runs emulated on the CPU"
        if selected
        else f"select with {EMULATION_ENV}=hip-cpu (a test / debugging device, not a GPU)"
    )
    return not wrong, f"{toolchain.describe()}; {how}"
