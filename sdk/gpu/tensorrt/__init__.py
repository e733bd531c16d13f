"""The TensorRT import shim and the rules that differ between TensorRT versions (the GPU layer).

Nothing here imports ``tensorrt`` at module level. The engine loader sits beside its runner in
:mod:`pairedge.runtime.backends` (``tensorrt_loader`` / ``tensorrt``); the builder in
:mod:`pairedge.export.tensorrt`.

- :mod:`.versions` — the one place where TensorRT 10.3 / 10.12+ / 11.x differ.
- :mod:`.logger` — TensorRT's log routed to :mod:`logging`.
"""

from __future__ import annotations

from typing import Any

from pairedge.core.errors import MissingDependencyError
from pairedge.core.optional import install_hint, require

# How to get TensorRT: the extra on x86-64 / SBSA, JetPack on a Jetson (one wording, from
# pairedge.core.optional).
INSTALL_HINT = install_hint("tensorrt")


def load_tensorrt() -> Any:
    """Import ``tensorrt`` or raise one line naming what is missing and how to get it.

    Raises:
        MissingDependencyError: not installed (the message names ``pairedge[tensorrt]`` and JetPack), or the
            ``tensorrt`` found is not TensorRT (only ``tensorrt-stubs``, an empty namespace package).
    """
    tensorrt = require("tensorrt", name="TensorRT")  # lazy: only needed when building or running engines
    if not hasattr(tensorrt, "Builder"):  # e.g. only `tensorrt-stubs` installed: an empty namespace package
        where = getattr(tensorrt, "__path__", "?")
        raise MissingDependencyError(
            f"the `tensorrt` found at {where} is not TensorRT (stubs only?); install it with: {INSTALL_HINT}"
        )
    return tensorrt
