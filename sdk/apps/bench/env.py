"""The machine a benchmark ran on: CPU, GPU, library versions and, on Jetson, the power mode and clocks."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pairedge.apps.probe import probe
from pairedge.core.version import __version__

#: Where Jetson boards expose their clocks (read when present; absent elsewhere).
_CPU_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
_GPU_FREQ_GLOBS = (
    "/sys/devices/gpu.0/devfreq/*/cur_freq",
    "/sys/devices/platform/*gpu*/devfreq/*/cur_freq",
    "/sys/devices/platform/bus@0/*gpu*/devfreq/*/cur_freq",
)
_EMC_FREQ = Path("/sys/kernel/debug/bpmp/debug/clk/emc/rate")
_TEGRA = Path("/etc/nv_tegra_release")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def cpu_model() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``), else ``platform.processor()``, with the core count."""
    name = ""
    text = _read(Path("/proc/cpuinfo")) or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Model") and value.strip():
            name = value.strip()
            break
    name = name or platform.processor() or platform.machine()
    return f"{name} ({os.cpu_count()} logical cores)"


def jetson() -> dict[str, Any] | None:
    """Jetson power mode (``nvpmodel -q``) and clocks from /sys, or None when this is not a Jetson."""
    release = _read(_TEGRA)
    if release is None:
        return None
    info: dict[str, Any] = {"l4t": release.splitlines()[0] if release else ""}
    if shutil.which("nvpmodel"):
        try:
            res = subprocess.run(["nvpmodel", "-q"], capture_output=True, text=True, timeout=5, check=False)
            info["power_mode"] = " ".join(res.stdout.split()) or res.stderr.strip() or "unreadable"
        except (OSError, subprocess.SubprocessError) as exc:
            info["power_mode"] = f"unreadable ({exc})"
    else:
        info["power_mode"] = "unreadable (nvpmodel not found)"
    cpu = _read(_CPU_FREQ)
    info["cpu_clock_mhz"] = int(cpu) / 1000 if cpu and cpu.isdigit() else None
    import glob

    gpu = next((v for p in _GPU_FREQ_GLOBS for f in sorted(glob.glob(p)) if (v := _read(Path(f)))), None)
    info["gpu_clock_mhz"] = int(gpu) / 1e6 if gpu and gpu.isdigit() else None
    emc = _read(_EMC_FREQ)
    info["emc_clock_mhz"] = int(emc) / 1e6 if emc and emc.isdigit() else None
    return info


def environment() -> dict[str, Any]:
    """CPU, GPU, library versions (``pairedge doctor``'s probe), Jetson power mode and clocks when
    readable."""

    checks = probe().as_dict()
    gpu = next((v for k, v in checks.items() if "gpu" in k.lower()), None)
    return {
        "pairedge": __version__,
        "cpu": cpu_model(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "gpu": gpu["detail"] if gpu else "none",
        "libraries": {k: v["detail"] for k, v in checks.items()},
        "jetson": jetson(),
        "threads": {"omp_num_threads": os.environ.get("OMP_NUM_THREADS")},
    }
