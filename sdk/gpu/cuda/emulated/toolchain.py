"""What the emulated device needs on this machine: the HIP-CPU headers, g++ with C++17, and TBB.

* HIP-CPU (the HIP CPU Runtime, header-only): ``$PAIREDGE_HIP_CPU``, else ``../shared/tools/hip-cpu`` next to
  the pairedge checkout (``include/hip/hip_runtime.h`` must be there).
* g++ >= 9 (``$PAIREDGE_CXX`` names another g++).
* Intel TBB headers and ``libtbb.so`` (Debian / Ubuntu: ``apt-get install -y libtbb-dev``): HIP-CPU runs the
  blocks of a grid with the C++17 parallel algorithms, which libstdc++ implements on TBB.

:func:`unavailable_reason` is cheap (file checks and one ``g++ -dumpfullversion``, cached): ``pairedge
doctor`` and the tests' skip reasons call it; nothing is compiled.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ENV_ROOT = "PAIREDGE_HIP_CPU"
ENV_CXX = "PAIREDGE_CXX"
INSTALL_TBB = "apt-get install -y libtbb-dev"
_CHECKOUT = Path(__file__).resolve().parents[4]  # sdk/gpu/cuda/emulated/toolchain.py -> the checkout root


@dataclass(frozen=True)
class Toolchain:
    """A usable toolchain: HIP-CPU folder, compiler path and version, TBB version."""

    hip_cpu: Path
    cxx: str
    cxx_version: str
    tbb_version: str

    def describe(self) -> str:
        return f"HIP-CPU at {self.hip_cpu}, g++ {self.cxx_version}, TBB {self.tbb_version}"


def hip_cpu_root() -> tuple[Path | None, str]:
    """The HIP-CPU folder and "", or None and why it was not found."""
    explicit = os.environ.get(ENV_ROOT)
    candidates = (
        [Path(explicit).expanduser()] if explicit else [_CHECKOUT.parent / "shared" / "tools" / "hip-cpu"]
    )
    for root in candidates:
        if (root / "include" / "hip" / "hip_runtime.h").is_file():
            return root.resolve(), ""
    where = f"${ENV_ROOT}={explicit}" if explicit else str(candidates[0])
    return None, (
        f"HIP-CPU not found at {where} (no include/hip/hip_runtime.h); point {ENV_ROOT} at a HIP CPU "
        "Runtime checkout (github.com/ROCm/HIP-CPU)"
    )


def _split(var: str) -> list[str]:
    return [p for p in os.environ.get(var, "").split(os.pathsep) if p]


def _tbb_header() -> Path | None:
    dirs = [*_split("CPATH"), *_split("CPLUS_INCLUDE_PATH"), "/usr/local/include", "/usr/include"]
    for d in dirs:
        for rel in ("oneapi/tbb/version.h", "tbb/version.h", "tbb/tbb_stddef.h"):
            if (Path(d) / rel).is_file():
                return Path(d) / rel
    return None


def _tbb_library() -> str | None:
    patterns = [f"{d}/libtbb.so" for d in _split("LIBRARY_PATH")]
    patterns += [
        "/usr/lib/*/libtbb.so",
        "/usr/lib*/libtbb.so",
        "/usr/local/lib*/libtbb.so",
        "/lib/*/libtbb.so",
    ]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def tbb_version() -> tuple[str | None, str]:
    """TBB's version ("2021.8") and "", or None and why it is not usable."""
    header, library = _tbb_header(), _tbb_library()
    if header is None or library is None:
        missing = " and ".join(w for w, x in (("headers", header), ("libtbb.so", library)) if x is None)
        return None, f"Intel TBB {missing} not found (HIP-CPU runs grids on TBB); install with: {INSTALL_TBB}"
    text = header.read_text(errors="replace")
    major = re.search(r"#define\s+TBB_VERSION_MAJOR\s+(\d+)", text)
    minor = re.search(r"#define\s+TBB_VERSION_MINOR\s+(\d+)", text)
    return (f"{major.group(1)}.{minor.group(1)}" if major and minor else "unknown version"), ""


@functools.lru_cache(maxsize=4)
def _cxx_version(path: str) -> str | None:
    try:
        out = subprocess.run(
            [path, "-dumpfullversion", "-dumpversion"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def compiler() -> tuple[str | None, str, str]:
    """(g++ path, version, "") or (None, "", why not)."""
    name = os.environ.get(ENV_CXX) or "g++"
    path = shutil.which(name)
    if path is None:
        return None, "", f"{name} not found (the emulated device compiles kernels with g++ >= 9); install g++"
    version = _cxx_version(path)
    if version is None:
        return None, "", f"{path} does not run (-dumpfullversion failed)"
    if int(version.split(".")[0]) < 9:
        return None, "", f"{path} is g++ {version}; HIP-CPU needs g++ >= 9 (C++17)"
    return path, version, ""


def find_toolchain() -> tuple[Toolchain | None, str]:
    """The toolchain and "", or None and the first missing piece (the exact reason tests skip with)."""
    root, why = hip_cpu_root()
    if root is None:
        return None, why
    cxx, version, why = compiler()
    if cxx is None:
        return None, why
    tbb, why = tbb_version()
    if tbb is None:
        return None, why
    return Toolchain(root, cxx, version, tbb), ""


def unavailable_reason() -> str | None:
    """None when the emulated device can be built here, else why not."""
    toolchain, why = find_toolchain()
    return None if toolchain is not None else why
