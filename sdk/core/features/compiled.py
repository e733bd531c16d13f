"""The feature code's one C extension, ``_pairkernel``, if ``pip install`` built it (else None).

``_pairkernel.c`` holds the compiled pair block (:mod:`pairedge.core.features.pairkernel`), the per-box flow
sums (:func:`pairedge.core.features.flowpool.flow_moments`) and the track-history motion
(:meth:`pairedge.core.features.history.TrackHistory.motion`); each has its numpy definition beside it, used
where the extension is absent. ``PAIREDGE_PAIR_KERNEL=numpy`` in the environment (read at import) makes this
process use numpy throughout (benchmarks before / after, debugging).
"""

from __future__ import annotations

import os
from types import ModuleType

#: The extension's interface version (its module constant ``ABI``); a build of another version is not used.
ABI = 3


def forced_numpy() -> bool:
    """Whether ``PAIREDGE_PAIR_KERNEL=numpy`` asked for numpy."""
    return os.environ.get("PAIREDGE_PAIR_KERNEL", "").strip().lower() == "numpy"


def _load() -> ModuleType | None:
    if forced_numpy():
        return None
    try:
        from pairedge.core.features import _pairkernel  # type: ignore[attr-defined]
    except ImportError:
        return None
    if getattr(_pairkernel, "ABI", None) != ABI:
        return None  # a stale build from another version of the C file: numpy is right, the build is not
    return _pairkernel


KERNEL = _load()


def implementation() -> str:
    """``"compiled"`` when this process computes with the extension, else ``"numpy"``."""
    return "compiled" if KERNEL is not None else "numpy"
