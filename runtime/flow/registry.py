"""Flow backends by name, imported lazily.

The table maps a name to ``"module:Class"``; nothing is imported until a backend is asked for, so a GPU
backend (for example a CUDA kernel with fused per-box pooling) plugs in by adding one row and a module
whose class reports through :meth:`FlowBackend.unavailable_reason` why it cannot run on a given machine.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pairedge.errors import BackendError, InputError
from pairedge.runtime.flow.base import FlowBackend

#: name -> "module:Class". Read-only; the first entry is the CPU default.
FLOW_BACKENDS: Mapping[str, str] = MappingProxyType(
    {
        "dis": "pairedge.runtime.flow.dis:DISFlow",
        "farneback": "pairedge.runtime.flow.farneback:FarnebackFlow",
    }
)

#: What ``"auto"`` resolves to when the caller has no preference (a feature spec may name one).
DEFAULT_FLOW_BACKEND = "dis"


def flow_backend_class(name: str) -> type[FlowBackend]:
    """The class registered under ``name`` (imports its module)."""
    if name not in FLOW_BACKENDS:
        raise InputError(f"unknown flow backend {name!r}; expected one of {sorted(FLOW_BACKENDS)} or 'auto'")
    module_name, _, class_name = FLOW_BACKENDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(f"flow backend {name!r} cannot be imported: {exc}") from exc
    cls = getattr(module, class_name)
    if not (isinstance(cls, type) and issubclass(cls, FlowBackend)):
        raise BackendError(f"flow backend {name!r}: {FLOW_BACKENDS[name]} is not a FlowBackend")
    return cls


def available_flow_backends() -> dict[str, str | None]:
    """Every registered name -> None when it runs here, else the reason it does not."""
    out: dict[str, str | None] = {}
    for name in FLOW_BACKENDS:
        try:
            out[name] = flow_backend_class(name).unavailable_reason()
        except BackendError as exc:
            out[name] = str(exc)
    return out


def get_flow_backend(name: str = "auto", **options: Any) -> FlowBackend:
    """Create a flow backend by name.

    Args:
        name: a registered name ("dis", "farneback", ...) or "auto" for :data:`DEFAULT_FLOW_BACKEND`.
        options: keyword arguments of that backend, e.g. ``preset="fast", scale=0.5`` for DIS.

    Raises:
        InputError: unknown name or option. BackendError: the backend cannot run on this machine.
    """
    resolved = DEFAULT_FLOW_BACKEND if name == "auto" else name
    cls = flow_backend_class(resolved)
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendError(f"flow backend {resolved!r} is not available on this machine: {reason}")
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(f"flow backend {resolved!r}: unknown option(s) {unknown}; accepted: {accepted}")
    return cls(**options)
