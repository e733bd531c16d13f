"""What this machine can run. One probe, used by ``pairedge doctor`` and by the GPU tests' skip reasons; on a
Jetson also its L4T / JetPack version, power mode and clocks (:func:`jetson_checks`).

Every check is defensive: a missing or broken package gives a row that says so, never an exception.
Version lookups use package metadata where possible so that the probe does not import torch or TensorRT.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import importlib.util
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairedge.core.errors import FormatError, ModelError
from pairedge.core.features import compiled
from pairedge.core.limits import read_bytes
from pairedge.gpu.cuda.status import binding_check, driver_check, emulation_check, emulation_setting
from pairedge.gpu.cuda.status import cuda_devices as layer_devices
from pairedge.runtime.detectors.bundled import bundled_detector
from pairedge.runtime.detectors.hog import HogDetector
from pairedge.runtime.flow import available_flow_backends


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
                "break each other: pip uninstall -y onnxruntime onnxruntime-gpu && pip install "
                "onnxruntime-gpu",
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

    return layer_devices()


def _cuda_checks() -> list[Check]:
    """The CUDA layer's rows: its bindings, the driver and GPUs, and the emulated device (nothing opened)."""

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
    or ``PAIREDGE_CUDA_EMULATION=hip-cpu`` and the emulated device's toolchain: then it is "cuda
    (emulated)")."""

    found = available_flow_backends()
    emulated = emulation_setting()[0]
    usable = [
        f"{name} (emulated)" if name == "cuda" and emulated else name
        for name, reason in found.items()
        if reason is None
    ]
    missing = "; ".join(f"{name}: {reason}" for name, reason in found.items() if reason is not None)
    detail = "usable: " + ", ".join(usable) + (f" (not usable: {missing})" if missing else "")
    return Check("flow backends", bool(usable), detail)


# -- Jetson rows: L4T / JetPack, power mode, clocks, where OpenCV and numpy come from, rosbags, ray ----------
# Read, never changed: small sysfs / /etc files under ``root`` (``/`` on a real machine, a temporary folder in
# the tests), ``dpkg-query`` and ``nvpmodel -q`` run without sudo, each bounded by TIMEOUT_S, through
# ``runner`` (subprocess.run; a fake in the tests). Missing or unreadable gives a row that says so.
# No row imports ray, rosbags, cv2 or numpy: versions from package metadata, origins from find_spec.
#: seconds each external command may take (``dpkg-query``, ``nvpmodel -q``)
TIMEOUT_S = 5.0
#: bytes read from one sysfs or release file at most
SMALL_FILE_BYTES = 4096
#: at most this many CPU cores are read (a big server has hundreds; the row stays a summary)
MAX_CPUS = 256
#: where the L4T release file is (relative to ``root``)
TEGRA_RELEASE = "etc/nv_tegra_release"
#: GPU devfreq nodes: Orin (``bus@0/17000000.gpu``), older Jetsons (``17000000.ga10b``, ``57000000.gpu``),
#: Thor
GPU_FREQ_GLOBS = (
    "sys/devices/platform/*gpu*/devfreq/*/cur_freq",
    "sys/devices/platform/bus@0/*gpu*/devfreq/*/cur_freq",
    "sys/class/devfreq/*gpu*/cur_freq",
    "sys/class/devfreq/*ga10b*/cur_freq",
)
#: pip distributions of OpenCV; on a Jetson none of them should be in the venv (JetPack's cv2 is used)
OPENCV_DISTS = (
    "opencv-contrib-python-headless",
    "opencv-python-headless",
    "opencv-contrib-python",
    "opencv-python",
)
NOT_A_JETSON = f"not a Jetson (no /{TEGRA_RELEASE})"

Runner = Callable[..., Any]


def _small_text(path: Path) -> str | None:
    """The first line-safe text of a small file (sysfs, /etc), or None when absent / unreadable / too big."""
    try:
        return read_bytes(path, "a small system file", SMALL_FILE_BYTES).decode("utf-8", "replace").strip()
    except (FormatError, OSError):
        return None


def _run(runner: Runner, argv: Sequence[str]) -> tuple[str | None, str]:
    """(stdout, "") of a finished command, or (None, why not); never raises, never waits past TIMEOUT_S."""
    try:
        done = runner(list(argv), capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        return None, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return None, f"{argv[0]} took more than {TIMEOUT_S:g} s"
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{argv[0]} does not run ({exc})"
    if done.returncode != 0:
        err = (done.stderr or "").strip().splitlines()
        return None, f"{' '.join(argv)} exited {done.returncode}" + (f": {err[-1][:120]}" if err else "")
    return str(done.stdout or ""), ""


def parse_tegra_release(text: str) -> str | None:
    """``# R36 (release), REVISION: 4.3, GCID: ...`` -> ``"36.4.3"``; None when the line is not of that
    form."""
    m = re.search(r"R(\d+)\s*\(release\),\s*REVISION:\s*(\d+)(?:\.(\d+))?", text)
    if m is None:
        return None
    return ".".join(p for p in m.groups() if p is not None)


def is_jetson(root: Path) -> bool:
    """Whether ``root`` is a Jetson's file system (it has the L4T release file)."""
    return (root / TEGRA_RELEASE).is_file()


def l4t_check(root: Path, runner: Runner) -> Check:
    """``Jetson L4T / JetPack``: the L4T release and, when the meta-package is installed, JetPack's
    version."""
    text = _small_text(root / TEGRA_RELEASE)
    if text is None:
        return Check("Jetson L4T / JetPack", False, NOT_A_JETSON)
    l4t = parse_tegra_release(text)
    detail = f"L4T {l4t}" if l4t else f"L4T release file not understood: {text.splitlines()[0][:80]!r}"
    out, why = _run(runner, ["dpkg-query", "-W", "-f=${Version}", "nvidia-jetpack"])
    if out and out.strip():
        detail += f", JetPack {out.strip().split('+')[0]}"
    else:
        detail += f", JetPack meta-package not found ({why or 'not installed'})"
    return Check("Jetson L4T / JetPack", l4t is not None, detail)


def power_mode_check(root: Path, runner: Runner) -> Check:
    """``Jetson power mode``: ``nvpmodel -q`` -> ``"MAXN (mode 0)"`` (no sudo needed to query)."""
    if not is_jetson(root):
        return Check("Jetson power mode", False, NOT_A_JETSON)
    out, why = _run(runner, ["nvpmodel", "-q"])
    if out is None:
        return Check("Jetson power mode", False, why)
    name = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if "Power Mode" in ln), None)
    number = next((ln.strip() for ln in out.splitlines() if ln.strip().isdigit()), None)
    if name is None:
        return Check("Jetson power mode", False, f"nvpmodel -q printed no power mode: {out.strip()[:80]!r}")
    return Check("Jetson power mode", True, name + (f" (mode {number})" if number else ""))


def _mhz(text: str | None, unit_hz: int) -> int | None:
    try:
        return round(int(str(text).split()[0]) / unit_hz) if text else None
    except (ValueError, IndexError):
        return None


def clocks_check(root: Path) -> Check:
    """``clocks``: CPU cores' current frequency range (cpufreq, kHz) and the GPU's devfreq clock (Hz)."""
    cpu_dir = root / "sys/devices/system/cpu"
    cpus = sorted(cpu_dir.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))[:MAX_CPUS] if cpu_dir.is_dir() else []
    cpu = [m for m in (_mhz(_small_text(p), 1000) for p in cpus) if m is not None]
    gpu = None
    for pattern in GPU_FREQ_GLOBS:
        for node in sorted(root.glob(pattern)):
            gpu = _mhz(_small_text(node), 1_000_000)
            if gpu is not None:
                break
        if gpu is not None:
            break
    parts = []
    if cpu:
        span = f"{min(cpu)}" if min(cpu) == max(cpu) else f"{min(cpu)}-{max(cpu)}"
        parts.append(f"CPU {len(cpu)} cores {span} MHz")
    else:
        parts.append("CPU clock not readable")
    if gpu is not None:
        parts.append(f"GPU {gpu} MHz")
    elif is_jetson(root):
        parts.append("GPU devfreq not readable")
    return Check("clocks", bool(cpu) or gpu is not None, ", ".join(parts))


def _origin(module: str) -> str | None:
    """The folder the import system would load ``module`` from (nothing imported), or None."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return str(Path(spec.origin).parent.parent)


def _in_venv(folder: str) -> bool:
    return sys.prefix != sys.base_prefix and Path(folder).resolve().is_relative_to(Path(sys.prefix).resolve())


def opencv_origin_check(root: Path) -> Check:
    """``OpenCV build``: the pip distribution of cv2 or "system" (JetPack's, no pip metadata), and where it
    is. On a Jetson a pip OpenCV is a problem: it shadows JetPack's build (GStreamer, the CSI camera path)."""
    where = _origin("cv2")
    if where is None:
        return Check("OpenCV build", False, "cv2 not found")
    dists = [f"{d} {v}" for d in OPENCV_DISTS if (v := _dist_version(d))]
    if not dists:
        return Check("OpenCV build", True, f"system build, no pip package ({where})")
    detail = f"pip {', '.join(dists)} ({where})"
    if is_jetson(root):
        return Check(
            "OpenCV build",
            False,
            f"{detail}: it shadows JetPack's OpenCV; pip uninstall -y "
            f"{' '.join(d.split()[0] for d in dists)} (docs/jetson.md)",
        )
    return Check("OpenCV build", True, detail)


def numpy_origin_check(root: Path) -> Check:
    """``numpy build``: version and place; on a Jetson numpy 2 breaks JetPack's cv2 / TensorRT (built for
    1.x)."""
    where = _origin("numpy")
    version = _dist_version("numpy")
    if where is None or version is None:
        return Check("numpy build", False, "numpy not found")
    place = "venv" if _in_venv(where) else "system"
    detail = f"{version} ({place}: {where})"
    if is_jetson(root) and version.split(".")[0] != "1":
        return Check(
            "numpy build",
            False,
            f"{detail}: JetPack's OpenCV and TensorRT bindings are built for "
            "numpy 1.x; reinstall with install/jetson/constraints-jp<6|7>.txt (docs/jetson.md)",
        )
    return Check("numpy build", True, detail)


def package_check(name: str, extra: str, purpose: str, how: str | None = None) -> Check:
    """A row for an optional package, from its metadata (never imported: ray takes seconds to import);
    ``how``: the install line when it is not just the extra."""
    version = _dist_version(name)
    if version is None:
        how = how or f"pip install -e '.[{extra}]'"
        return Check(name, False, f"not installed ({purpose}: {how} in the clone)")
    return Check(name, True, version)


def jetson_checks(root: Path = Path("/"), runner: Runner = subprocess.run) -> list[Check]:
    """The rows, in display order. ``root``: the file system to read; ``runner``: runs the commands."""
    return [
        l4t_check(root, runner),
        power_mode_check(root, runner),
        clocks_check(root),
        opencv_origin_check(root),
        numpy_origin_check(root),
        package_check("rosbags", "ros", "reading ROS 2 bags"),
        package_check("ray", "fleet", "pairedge eval --executor ray"),
        package_check(
            "trackers",
            "trackers",
            "--tracker bytetrack / ocsort / botsort",
            "pip install -e '.[trackers]' && pip install --no-deps 'trackers>=2.6,<2.7'",
        ),
    ]


def nvcc_path() -> str | None:
    """Path of nvcc if present (tests compile CUDA sources with it)."""
    check = _nvcc_check()
    return check.detail.split(" ")[0] if check.ok else None


def probe() -> Probe:
    """Run every check. Takes well under a second unless nvcc is slow to start (the Jetson rows' commands
    are bounded by :data:`TIMEOUT_S`)."""
    checks = [
        Check("python", True, f"{platform.python_version()} ({platform.machine()}, {platform.system()})"),
        _module_check("numpy", "numpy"),
        _module_check(
            "opencv", "cv2", "opencv-contrib-python-headless", "opencv-python-headless", "opencv-python"
        ),
        *_onnxruntime_checks(),
        _module_check("onnx", "onnx"),
        _torch_check(),
        _module_check("tensorrt", "tensorrt"),
        *_cuda_checks(),
        _nvcc_check(),
        _flow_backends_check(),
        _detector_check(),
        _feature_kernels_check(),
        *jetson_checks(),
    ]
    return Probe(tuple(checks))


def _detector_check() -> Check:
    """The bundled person detector (the default of ``pairedge run`` without detections): what it is, where it
    comes from, its licence, whether its files match their manifest; and whether HOG runs here."""

    hog = (
        "HOG available (--detector hog)"
        if HogDetector.unavailable_reason() is None
        else "no HOG in this OpenCV"
    )
    try:
        b = bundled_detector()
        b.path("fp32"), b.path("fp16")
    except ModelError as exc:
        return Check("detector", False, f"bundled detector unusable: {exc}; {hog}")
    return Check(
        "detector",
        True,
        f"{b.name}: {b.title}, {b.source}; licence {b.licence} (LICENSE and PROVENANCE.md "
        f"in {b.folder}); files verified (fp32, fp16); the default without --detections; {hog}",
    )


def _feature_kernels_check() -> Check:
    """Whether the features' hot loops run compiled (``_pairkernel``, built by pip where a C compiler is) or
    by numpy."""

    if compiled.implementation() == "compiled":
        return Check("feature kernels", True, "compiled (_pairkernel: pair block, flow sums, track history)")
    why = (
        "PAIREDGE_PAIR_KERNEL=numpy"
        if compiled.forced_numpy()
        else "not built: no C compiler when pip installed pairedge"
    )
    return Check("feature kernels", False, f"numpy ({why}); the same values, slower with crowds")


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

    ok, detail = emulation_check()
    return None if ok else f"CUDA emulation: {detail}"
