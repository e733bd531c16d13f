"""The activate / deactivate lifecycle shared by classifier backends and person detectors.

A component is created cheaply (options checked, files found) and acquires its heavy resources (an ONNX
Runtime session, a TensorRT context, a HOG descriptor) in :meth:`Lifecycle.activate`;
:meth:`Lifecycle.deactivate` releases them. Both are idempotent, and a ``with`` block does both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import TypeVar

_Self = TypeVar("_Self", bound="Lifecycle")


class Lifecycle(ABC):
    """Idempotent :meth:`activate` / :meth:`deactivate` around a subclass's :meth:`_activate` /
    :meth:`_deactivate`."""

    _active: bool = False

    @property
    def is_active(self) -> bool:
        return self._active

    def activate(self: _Self) -> _Self:
        """Acquire the resources. Idempotent; returns self."""
        if not self._active:
            self._activate()
            self._active = True
        return self

    def deactivate(self) -> None:
        """Release what :meth:`activate` acquired. Idempotent."""
        if self._active:
            self._active = False
            self._deactivate()

    def __enter__(self: _Self) -> _Self:
        return self.activate()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.deactivate()

    @abstractmethod
    def _activate(self) -> None:
        """Acquire the resources (called once per activation)."""

    @abstractmethod
    def _deactivate(self) -> None:
        """Release what :meth:`_activate` acquired."""
