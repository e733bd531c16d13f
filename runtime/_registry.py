"""Lazy name -> class tables shared by the flow and classifier backend registries.

A table maps a name to ``"module:Class"``; nothing is imported until a class is asked for, so a GPU-only
backend costs nothing on a machine without the GPU stack.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TypeVar

from pairedge.core.errors import BackendError, InputError

T = TypeVar("T")


def load_registered(table: Mapping[str, str], name: str, base: type[T], kind: str) -> type[T]:
    """Import and return the class registered under ``name``, checking it subclasses ``base``.

    Args:
        table: name -> ``"module:Class"``.
        kind: what the table holds, for messages ("flow backend", "classifier backend").

    Raises:
        InputError: unknown name. BackendError: the module cannot be imported or the entry is not a ``base``.
    """
    if name not in table:
        raise InputError(f"unknown {kind} {name!r}; expected one of {sorted(table)} or 'auto'")
    module_name, _, class_name = table[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(f"{kind} {name!r} cannot be imported: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise BackendError(f"{kind} {name!r}: {table[name]} is not a {base.__name__}")
    return cls


def availability(
    table: Mapping[str, str], unavailable_reason: Callable[[str], str | None]
) -> dict[str, str | None]:
    """Every registered name -> None when it runs here, else the reason it does not."""
    out: dict[str, str | None] = {}
    for name in table:
        try:
            out[name] = unavailable_reason(name)
        except BackendError as exc:
            out[name] = str(exc)
    return out
