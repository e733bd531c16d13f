"""The one classifier interface of the runtime, in the Polygraphy runner style.

A :class:`Backend` wraps one loaded classifier (:class:`~pairedge.runtime.backends.model.ModelFile`).
Its lifecycle is explicit: :meth:`Backend.activate` creates the session / engine context,
:meth:`Backend.deactivate` releases it, and the backend is a context manager doing both. The public
:meth:`Backend.infer` validates its input (shape, dtype, finiteness), answers an empty batch without touching
the model, and calls the protected :meth:`Backend._infer` that subclasses write.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np
from pairedge.core.errors import BackendError, InputError
from pairedge.runtime.backends.model import ModelFile
from pairedge.runtime.lifecycle import Lifecycle


def all_finite(x: np.ndarray) -> bool:
    """True when every value of ``x`` is finite. Fast path: a finite sum implies finite elements (a NaN or
    inf propagates); only when the sum is not finite (or overflows) are the elements checked one by one."""
    return bool(np.isfinite(x.sum())) or bool(np.isfinite(x).all())


class Backend(Lifecycle):
    """Runs one pairwise classifier: (N, F) float32 features -> (N, C) float32 logits.

    Args:
        model: the checked model file.
    """

    name: ClassVar[str] = ""
    #: The frozen options dataclass this backend takes (``PipelineConfig.backend_options``, the ``options``
    #: of :func:`~pairedge.runtime.backends.registry.get_backend`), e.g. ``OrtOptions``; None: not declared
    #: (the backend checks what it is given itself).
    options_type: ClassVar[type | None] = None

    def __init__(self, model: ModelFile) -> None:
        self.model = model
        self._active = False
        self._empty = np.zeros((0, model.num_classes), np.float32)

    @classmethod
    def check_options(cls, options: object | None) -> object | None:
        """``options`` when it is None (the defaults) or an instance of :attr:`options_type`.

        Raises:
            InputError: options of another type (another backend's, a dict, ...), naming the expected one.
        """
        expected = cls.options_type
        if options is None or expected is None or isinstance(options, expected):
            return options
        raise InputError(
            f"classifier backend {cls.name or cls.__name__!r}: expected options of type {expected.__name__} "
            f"({expected.__module__}), got {type(options).__name__}; pass {expected.__name__}(...) or None"
        )

    # -- availability -------------------------------------------------------------------------------------
    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when this backend can run on this machine, else why not."""
        return None

    @property
    def num_features(self) -> int:
        return self.model.num_features

    @property
    def num_classes(self) -> int:
        return self.model.num_classes

    # -- inference ----------------------------------------------------------------------------------------
    def infer(self, features: np.ndarray) -> np.ndarray:
        """Logits of a batch of pairs.

        Args:
            features: (N, F) float32 raw (un-normalised) features, finite; N may be 0.

        Returns:
            (N, C) float32 logits, a new array owned by the caller.

        Raises:
            InputError: wrong type, dtype, shape or non-finite values. BackendError: not activated, or the
            runtime failed.
        """
        if not self._active:
            raise BackendError(f"{self!r} is not active; call activate() first or use it in a `with` block")
        x = self.check_features(features)
        if len(x) == 0:
            return self._empty.copy()
        out = self._infer(x)
        if out.shape != (len(x), self.num_classes):
            raise BackendError(
                f"{self!r}: expected logits of shape {(len(x), self.num_classes)}, got {out.shape}"
            )
        return out

    def check_features(self, features: np.ndarray) -> np.ndarray:
        """Validate ``features``; returns it C-contiguous (no copy when it already is)."""
        if not isinstance(features, np.ndarray):
            raise InputError(f"features: expected a numpy array, got {type(features).__name__}")
        if features.dtype != np.float32:
            raise InputError(
                f"features: expected float32, got {features.dtype}; fix with features.astype(np.float32)"
            )
        if features.ndim != 2 or features.shape[1] != self.num_features:
            raise InputError(
                f"features: expected shape (N, {self.num_features}) for {self.model.path.name}, got "
                f"{features.shape}"
            )
        if not all_finite(features):
            bad = int((~np.isfinite(features)).any(axis=1).sum())
            raise InputError(
                f"features: {bad} row(s) contain NaN or inf; drop or repair them before inference"
            )
        return np.ascontiguousarray(features)

    @abstractmethod
    def _activate(self) -> None:
        """Create the session; called once per activation."""

    @abstractmethod
    def _deactivate(self) -> None:
        """Release what :meth:`_activate` created."""

    @abstractmethod
    def _infer(self, features: np.ndarray) -> np.ndarray:
        """Logits (N, C) float32 of validated, C-contiguous (N, F) float32 features with N >= 1."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.path.name})"
