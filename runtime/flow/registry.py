"""Flow backends by name, imported lazily.

The table maps a name to ``"module:Class"``; nothing is imported until a backend is asked for, so a GPU
backend (for example a CUDA kernel with fused per-box pooling) plugs in by adding one row and a module
whose class reports through :meth:`FlowBackend.unavailable_reason` why it cannot run on a given machine.
Options are typed: each backend's frozen ``Options`` dataclass (``DISFlow.Options(preset="fast",
scale=0.5)``), passed as they are or built from keywords; no signature is inspected.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pairedge.core.errors import BackendError
from pairedge.runtime._registry import availability, load_registered
from pairedge.runtime.flow.base import FlowBackend, FlowOptions

#: name -> "module:Class". Read-only; the first entry is the CPU default.
FLOW_BACKENDS: Mapping[str, str] = MappingProxyType(
    {
        "dis": "pairedge.runtime.flow.dis:DISFlow",
        "farneback": "pairedge.runtime.flow.farneback:FarnebackFlow",
        "reference": "pairedge.runtime.flow.reference:ReferenceFlow",
        "cuda": "pairedge.runtime.flow.cuda.backend:CudaFlow",
    }
)

#: What ``"auto"`` resolves to when the caller has no preference (a feature spec may name one).
DEFAULT_FLOW_BACKEND = "dis"


def flow_backend_class(name: str) -> type[FlowBackend]:
    """The class registered under ``name`` (imports its module)."""
    return load_registered(FLOW_BACKENDS, name, FlowBackend, "flow backend")


def available_flow_backends() -> dict[str, str | None]:
    """Every registered name -> None when it runs here, else the reason it does not."""
    return availability(FLOW_BACKENDS, lambda name: flow_backend_class(name).unavailable_reason())


def get_flow_backend(name: str = "auto", options: FlowOptions | None = None, **given: Any) -> FlowBackend:
    """Create a flow backend by name.

    Args:
        name: a registered name ("dis", "farneback", ...) or "auto" for :data:`DEFAULT_FLOW_BACKEND`.
        options: that backend's ``Options`` (e.g. ``DISFlow.Options(preset="fast", scale=0.5)``; for a
            pipeline's flow settings ``flow_backend_class(name).options_for(scale, preset)``), or None and
            the options as keywords, e.g. ``preset="fast", scale=0.5`` for DIS.

    Raises:
        InputError: unknown name or option, options of another backend. BackendError: the backend cannot
            run on this machine with these options (the CUDA one's ``api``: a GPU or the emulated device).
    """
    resolved = DEFAULT_FLOW_BACKEND if name == "auto" else name
    cls = flow_backend_class(resolved)
    checked = cls.make_options(options, **given)
    reason = cls.unavailable_reason(checked)
    if reason is not None:
        raise BackendError(f"flow backend {resolved!r} is not available on this machine: {reason}")
    return cls(checked)
