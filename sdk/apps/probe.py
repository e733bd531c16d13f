"""What this machine can run. One probe, used by ``pairedge doctor`` and by the GPU tests' skip reasons.

Every check is defensive: a missing or broken package gives a row that says so, never an exception.
Version lookups use package metadata where possible so that the probe does not import torch or TensorRT.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import platform
import shutil
import subprocess
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Check:
    """One row of the probe: ``ok`` is True when the component is usable."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Probe:
    """The whole probe; ``checks`` keeps the display order."""

    checks: tuple[Check, ...] = field(default_factory=tuple)

    def get(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def as_dict(self) -> dict[str, dict[str, object]]:
        return {c.name: {"ok": c.ok, "detail": c.detail} for c in self.checks}


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return None


def _module_check(name: str, module: str, *dists: str) -> Check:
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # a broken install must not crash the probe
        return Check(name, False, f"not installed ({type(exc).__name__})")
    version = getattr(mod, "__version__", None) or _dist_version(*dists) or "unknown version"
    return Check(name, True, str(version))


def _onnxruntime_checks() -> list[Check]:
    cpu = _dist_version("onnxruntime")
    gpu = _dist_version("onnxruntime-gpu")
    checks: list[Check] = []
    if cpu and gpu:
        checks.append(
            Check(
                "onnxruntime packages",
                False,
                f"both onnxruntime {cpu} and onnxruntime-gpu {gpu} are installed; they share one module and "
                "break each other: pip uninstall -y onnxruntime onnxruntime-gpu && pip install onnxruntime-gpu",
            )
        )
    try:
        import onnxruntime as ort

        providers = ", ".join(ort.get_available_providers())
        checks.append(Check("onnxruntime", True, f"{ort.__version__} ({providers})"))
    except Exception as exc:
        checks.append(Check("onnxruntime", False, f"not importable ({type(exc).__name__}: {exc})"))
    return checks


def _torch_check() -> Check:
    # Metadata only: importing torch takes seconds and is not needed to know it is there.
    version = _dist_version("torch")
    if version is None:
        return Check("torch", False, "not installed (only needed for training/export: pairedge[train])")
    return Check("torch", True, version)


def cuda_devices() -> tuple[list[tuple[str, str]], str | None]:
    """The CUDA devices as ``(name, "major.minor" compute capability)`` through the driver API (libcuda),
    without any Python CUDA package, and None; or ``([], why there is none)`` (the CUDA layer's probe)."""
    from pairedge.gpu.cuda.status import cuda_devices as layer_devices

    return layer_devices()


def _cuda_checks() -> list[Check]:
    """The CUDA layer's rows: its bindings, the driver and GPUs, and the emulated device (nothing opened)."""
    from pairedge.gpu.cuda.status import binding_check, driver_check, emulation_check

    rows = [Check(kind, *binding_check(kind)) for kind in ("cuda-python", "pycuda")]
    rows.append(Check("CUDA driver / GPU", *driver_check()))
    rows.append(Check("CUDA emulation", *emulation_check()))
    return rows


def _nvcc_check() -> Check:
    path = shutil.which("nvcc")
    if path is None:
        for candidate in ("/usr/local/cuda/bin/nvcc",):
            if shutil.which(candidate):
                path = candidate
                break
    if path is None:
        return Check("nvcc", False, "not found (CUDA kernels are compiled at run time with NVRTC instead)")
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
        release = next(
            (line.split("release")[-1].strip() for line in out.splitlines() if "release" in line), ""
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("nvcc", False, f"{path} does not run ({exc})")
    return Check("nvcc", True, f"{path} (release {release})" if release else path)


def _flow_backends_check() -> Check:
    """Which registered flow backends run here (the CUDA one needs cuda-python or pycuda, a driver and a GPU,
    or ``PAIREDGE_CUDA_EMULATION=hip-cpu`` and the emulated device's toolchain: then it is "cuda (emulated)")."""
    from pairedge.gpu.cuda.status import emulation_setting
    from pairedge.runtime.flow import available_flow_backends  # lazy: the runtime registry, no GPU import

    found = available_flow_backends()
    emulated = emulation_setting()[0]
    usable = [f"{name} (emulated)" if name == "cuda" and emulated else name
              for name, reason in found.items() if reason is None]  # fmt: skip
    missing = "; ".join(f"{name}: {reason}" for name, reason in found.items() if reason is not None)
    detail = "usable: " + ", ".join(usable) + (f" (not usable: {missing})" if missing else "")
    return Check("flow backends", bool(usable), detail)


def nvcc_path() -> str | None:
    """Path of nvcc if present (tests compile CUDA sources with it)."""
    check = _nvcc_check()
    return check.detail.split(" ")[0] if check.ok else None


def probe() -> Probe:
    """Run every check. Takes well under a second unless nvcc is slow to start."""
    checks = [
        Check("python", True, f"{platform.python_version()} ({platform.machine()}, {platform.system()})"),
        _module_check("numpy", "numpy"),
        _module_check("opencv", "cv2", "opencv-contrib-python-headless", "opencv-python-headless", "opencv-python"),
        *_onnxruntime_checks(),
        _module_check("onnx", "onnx"),
        _torch_check(),
        _module_check("tensorrt", "tensorrt"),
        *_cuda_checks(),
        _nvcc_check(),
        _flow_backends_check(),
    ]
    return Probe(tuple(checks))


def gpu_skip_reason(*, need_tensorrt: bool = False, need_cuda_python: bool = False) -> str | None:
    """None when the GPU work can run; otherwise the exact reason, as ``pairedge doctor`` prints it."""
    found = probe()
    wanted = ["CUDA driver / GPU"]
    if need_cuda_python:
        wanted.append("cuda-python")
    if need_tensorrt:
        wanted.append("tensorrt")
    for name in wanted:
        check = found.get(name)
        if not check.ok:
            return f"{name}: {check.detail}"
    return None


def emulation_skip_reason() -> str | None:
    """None when the emulated CUDA device (HIP-CPU) can be built here; otherwise the exact reason, as the
    ``CUDA emulation`` row of ``pairedge doctor`` prints it."""
    from pairedge.gpu.cuda.status import emulation_check

    ok, detail = emulation_check()
    return None if ok else f"CUDA emulation: {detail}"
