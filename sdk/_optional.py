"""Lazy imports of optional dependencies, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from pairedge.errors import MissingDependencyError

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
}


def require(module: str, *, extra: str | None = None, purpose: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` saying how to install it.

    Args:
        module: dotted module name, e.g. ``"torch"`` or ``"scipy.io"``.
        extra: the pairedge extra providing it; looked up from the top-level name when omitted.
        purpose: what the caller needs it for, shown in the message ("reading CAD .mat files").
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = extra or EXTRA_OF.get(top)
        why = f" for {purpose}" if purpose else ""
        how = f"pip install 'pairedge[{extra}]'" if extra else f"pip install {top}"
        raise MissingDependencyError(
            f"{module} is required{why} but is not installed ({exc}); install it with: {how}"
        ) from exc
