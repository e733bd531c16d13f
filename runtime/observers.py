"""Observers of a pipeline's features: see exactly what the runtime classifies, without a second extractor.

Calibration data collection and parity replay register a callable with
:meth:`~pairedge.runtime.pipeline.Pipeline.observe_features`; the pipeline calls it once per step in which
it computed features, with the step's detections and features. A pipeline with no observer pays one
truth test per frame.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from pairedge.core.features import PairFeatures
from pairedge.core.types import Detections

#: ``fn(detections, features)``: the (N,) people the features were computed on (validated, tracked, coasted
#: ones included, orientation as given) and the :class:`PairFeatures` stage 1 and stage 2 are given, the
#: object the extractor returned (no copy; do not modify it): ``pairs`` (M, 2) int64 track ids, ``index``
#: (M, 2) int64 rows of ``detections``, ``stage1`` (M, F1) and ``stage2`` (M, F2) float32. Pairs with
#: non-finite features are already dropped (then a subset of the extractor's rows) and ignored box-shape
#: columns already at the training mean. Stage 1 and stage 2 may still drop pairs whose logits are not
#: finite (``FrameResult.pairs`` are the pairs kept).
FeatureObserver = Callable[[Detections, PairFeatures], None]


class FeatureObservers:
    """The feature observers of one pipeline, in registration order."""

    def __init__(self) -> None:
        self._observers: list[FeatureObserver] = []

    def __bool__(self) -> bool:
        return bool(self._observers)

    def add(self, observer: FeatureObserver) -> Subscription:
        """Register ``observer``; the returned handle removes it (``.remove()`` or as a context manager)."""
        self._observers.append(observer)
        return Subscription(self, observer)

    def discard(self, observer: FeatureObserver) -> None:
        """Remove ``observer`` (its first registration) when registered."""
        if observer in self._observers:
            self._observers.remove(observer)

    def notify(self, detections: Detections, features: PairFeatures) -> None:
        """Call every observer with one step's detections and features."""
        for observer in tuple(self._observers):  # an observer may remove itself
            observer(detections, features)


class LastFeatures:
    """An observer that keeps the latest step's detections and features (None before the first, and after
    :meth:`clear`): what parity replay and calibration collection read after each ``step``."""

    def __init__(self) -> None:
        self.detections: Detections | None = None
        self.features: PairFeatures | None = None

    def __call__(self, detections: Detections, features: PairFeatures) -> None:
        self.detections, self.features = detections, features

    def clear(self) -> None:
        """Forget the last step (call before a step to tell whether it computed features)."""
        self.detections, self.features = None, None


class Subscription:
    """A registered observer; :meth:`remove` (idempotent) or leaving a ``with`` block unregisters it."""

    def __init__(self, observers: FeatureObservers, observer: FeatureObserver) -> None:
        self._observers: FeatureObservers | None = observers
        self.observer = observer

    def remove(self) -> None:
        if self._observers is not None:
            self._observers.discard(self.observer)
            self._observers = None

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()
