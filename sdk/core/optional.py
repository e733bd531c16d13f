"""Lazy imports of optional dependencies, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from pairedge.core.errors import MissingDependencyError

# Which extra provides which top-level module.
EXTRA_OF: dict[str, str] = {
    "torch": "train",
    "scipy": "data",
    "cuda": "gpu",
    "pycuda": "gpu",
    "tensorrt": "tensorrt",
    "matplotlib": "dev",
    "rosbags": "ros",
    "ray": "fleet",
    "sklearn": "dev",
    "trackers": "trackers",
    "supervision": "trackers",
}

_JETPACK = "sudo apt install nvidia-jetpack"

# Where pip alone is not the whole story on some platform: a note shown after the pip command.
PLATFORM_NOTES: dict[str, str] = {
    "tensorrt": (
        f"on a Jetson TensorRT is not on PyPI but comes with JetPack ({_JETPACK}, which provides "
        "python3-libnvinfer; create the venv with --system-site-packages to see it)"
    ),
    "cuda": f"on a Jetson the CUDA libraries it loads come with JetPack ({_JETPACK})",
    "pycuda": f"on a Jetson pycuda builds against JetPack's CUDA ({_JETPACK})",
}


def install_hint(module: str, *, extra: str | None = None, note: str | None = None) -> str:
    """How to get ``module``: ``pip install '.[<extra>]'`` in the pairedge clone (pairedge is installed from
    its source folder, not from a package index), then its platform note if it has one.

    Args:
        module: dotted module name; its top-level name picks the extra and the note when they are omitted.
        extra: the pairedge extra providing it (default: from :data:`EXTRA_OF`; none -> ``pip install
            <top>``).
        note: a platform note to append (default: from :data:`PLATFORM_NOTES`; ``""`` for none).
    """
    top = module.split(".")[0]
    extra = extra or EXTRA_OF.get(top)
    how = f"pip install '.[{extra}]' in the pairedge folder" if extra else f"pip install {top}"
    note = PLATFORM_NOTES.get(top, "") if note is None else note
    return f"{how}; {note}" if note else how


def require(
    module: str,
    *,
    extra: str | None = None,
    purpose: str = "",
    name: str | None = None,
    note: str | None = None,
) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` saying how to install it.

    Args:
        module: dotted module name, e.g. ``"torch"`` or ``"scipy.io"``.
        extra: the pairedge extra providing it; looked up from the top-level name when omitted.
        purpose: what the caller needs it for, shown in the message ("reading CAD .mat files").
        name: how the message names it ("TensorRT"); the module name when omitted.
        note: a platform note after the pip command (see :func:`install_hint`); looked up when omitted.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        what = name or module
        head = (
            f"{what} is required for {purpose} but is not installed"
            if purpose
            else f"{what} is not installed"
        )
        how = install_hint(module, extra=extra, note=note)
        raise MissingDependencyError(f"{head} ({exc}); install it with: {how}") from exc
