"""CUDA C source -> device code with NVRTC (``cuda.bindings.nvrtc``), cached per architecture in memory and
on disk. The GPU implementations of the layer (:mod:`.driver`, :mod:`.pycuda_device`) load what it returns.

Targets: a CUBIN for the device's own architecture when this NVRTC knows it (no JIT, runs on any driver of
the same CUDA major version), else PTX for the newest virtual architecture NVRTC knows below the device's
(the driver JIT-compiles it; a driver older than the PTX is reported with how to fix it).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairedge.core.errors import BackendError
from pairedge.core.optional import require

#: NVRTC options: no fused multiply-add, so products and sums round as in the numpy references.
OPTIONS = ("--fmad=false", "--std=c++14")
_TOO_OLD = ("UNSUPPORTED_PTX_VERSION", "NO_BINARY_FOR_GPU", "INVALID_PTX", "JIT_COMPILER_NOT_FOUND")


@dataclass(frozen=True)
class Target:
    """What to build: ``kind`` "cubin" (real architecture) or "ptx" (virtual), ``arch`` e.g. 90 for sm_90."""

    kind: str
    arch: int

    @property
    def option(self) -> str:
        prefix = "sm" if self.kind == "cubin" else "compute"
        return f"--gpu-architecture={prefix}_{self.arch}"


def choose_target(device_arch: int, supported: list[int] | tuple[int, ...]) -> Target:
    """The build target for a device of compute capability ``device_arch`` (e.g. 87) given NVRTC's list.

    Raises:
        BackendError: the device is older than every architecture this NVRTC supports.
    """
    if device_arch in supported:
        return Target("cubin", device_arch)
    older = [a for a in supported if a < device_arch]
    if not older:
        raise BackendError(
            f"CUDA: this NVRTC compiles for sm_{min(supported)} and newer, the GPU is sm_{device_arch}; "
            "fix by installing an older nvidia-cuda-nvrtc / cuda-python, or use flow='reference'"
        )
    return Target("ptx", max(older))


def load_error_hint(error_name: str, target: str) -> str:
    """How to fix a failed module load (a driver too old for the compiled code, most often)."""
    if any(k in error_name for k in _TOO_OLD):
        return (
            f"the CUDA driver cannot load the {target} built by this NVRTC (driver too old for it); fix by "
            "updating the NVIDIA driver, installing the nvidia-cuda-nvrtc / cuda-python release that matches "
            "the driver's CUDA version, or running with flow='reference' (CPU) or flow='dis'"
        )
    return "fix by checking `pairedge doctor`, or run with flow='reference' (CPU) or flow='dis'"


def _nvrtc() -> Any:
    return require("cuda.bindings.nvrtc", purpose="compiling CUDA kernels (NVRTC)")


def _check(result: tuple, what: str, prog: object = None) -> tuple:  # type: ignore[type-arg]
    nvrtc = _nvrtc()
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = ""
        if prog is not None:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            buf = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, buf)
            log = buf.decode(errors="replace").strip()
        raise BackendError(f"NVRTC {what} failed ({err.name}){': ' + log if log else ''}")
    return result


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use."""
    _, major, minor = _check(_nvrtc().nvrtcVersion(), "version")
    return int(major), int(minor)


def supported_archs() -> list[int]:
    """Real architectures (e.g. [75, 80, ..., 120]) this NVRTC can build CUBINs for."""
    _, archs = _check(_nvrtc().nvrtcGetSupportedArchs(), "supported archs")
    return [int(a) for a in archs]


def nvrtc_compile(source: str, name: str, target: Target) -> bytes:
    """Compile CUDA C ``source`` to a CUBIN or PTX (bytes). Raises BackendError with NVRTC's log."""
    nvrtc = _nvrtc()
    _, prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "create program")
    try:
        opts = [o.encode() for o in (target.option, *OPTIONS)]
        _check(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), f"compile of {name}", prog)
        if target.kind == "cubin":
            _, size = _check(nvrtc.nvrtcGetCUBINSize(prog), "CUBIN size")
            buf = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, buf), "CUBIN")
        else:
            _, size = _check(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
            buf = b" " * size
            _check(nvrtc.nvrtcGetPTX(prog, buf), "PTX")
        return bytes(buf)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def cache_root() -> Path:
    """``$PAIREDGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/pairedge``, else ``~/.cache/pairedge``."""
    explicit = os.environ.get("PAIREDGE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pairedge"


def cache_dir() -> Path:
    """Where NVRTC output is cached: ``cache_root() / "cuda"``."""
    return cache_root() / "cuda"


_MEMORY: dict[tuple[str, str], bytes] = {}


def compiled(name: str, source: str, target: Target, use_disk: bool = True) -> tuple[bytes, str]:
    """Device code of ``source`` (file ``name``) for ``target``; returns (code, "memory" | "disk" | "nvrtc").

    The cache key hashes the source, the options and the NVRTC version, so an edited kernel or another
    NVRTC never reuses stale code. An unwritable cache folder only costs a recompile next time.
    """
    key_text = "\n".join((source, target.option, *OPTIONS, repr(nvrtc_version())))
    key = hashlib.sha256(key_text.encode()).hexdigest()[:20]
    mem_key = (name, key)
    if mem_key in _MEMORY:
        return _MEMORY[mem_key], "memory"
    path = cache_dir() / f"{Path(name).stem}-{key}-{target.kind}{target.arch}.{target.kind}"
    if use_disk and path.is_file():
        code = path.read_bytes()
        _MEMORY[mem_key] = code
        return code, "disk"
    code = nvrtc_compile(source, name, target)
    _MEMORY[mem_key] = code
    if use_disk:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(code)
            tmp.replace(path)
        except OSError:
            pass
    return code, "nvrtc"


def build_for(name: str, source: str, device_arch: int) -> tuple[bytes, str, Target]:
    """Device code of ``source`` for a device of compute capability ``device_arch``: (code, how, target)."""
    target = choose_target(device_arch, supported_archs())
    code, how = compiled(name, source, target)
    return code, how, target
