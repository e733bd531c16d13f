"""The one person-detector interface of the runtime, with the lifecycle of the classifier backends.

A :class:`Detector` turns a frame into :class:`~pairedge.core.types.Detections`. Like
:class:`~pairedge.runtime.backends.base.Backend` it is activated explicitly (:meth:`Detector.activate`
creates the session, :meth:`Detector.deactivate` releases it; a ``with`` block does both), declares its
options dataclass (:attr:`Detector.options_type`) and says through :meth:`Detector.unavailable_reason` why it
cannot run on a machine. The public :meth:`Detector.detect` validates the frame and hands the raw boxes of
the protected :meth:`Detector._detect` to :mod:`pairedge.runtime.detectors.postprocess` (person filter,
threshold, NMS, cap) so every detector keeps boxes the same way.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np
from pairedge.core.errors import BackendError, InputError
from pairedge.core.types import Detections
from pairedge.runtime.detectors.guard import FrameCheck, frame_check
from pairedge.runtime.detectors.postprocess import DetectorOptions, select, to_detections
from pairedge.runtime.lifecycle import Lifecycle


class Detector(Lifecycle):
    """Finds people in one frame: (H, W, 3) uint8 BGR -> :class:`Detections` (``x y w h`` pixels, ids -1).

    Args:
        options: the detector's options dataclass (:attr:`options_type`); None: its defaults.
    """

    name: ClassVar[str] = ""
    #: The frozen options dataclass this detector takes (a :class:`DetectorOptions` or a subclass).
    options_type: ClassVar[type[DetectorOptions]] = DetectorOptions

    def __init__(self, options: DetectorOptions | None = None) -> None:
        self.options = self.check_options(options)
        self._active = False
        #: What the last :meth:`detect` produced, for
        #: :class:`~pairedge.runtime.detectors.guard.DetectorGuard`.
        self.last_check = FrameCheck()

    @classmethod
    def check_options(cls, options: object | None) -> DetectorOptions:
        """``options`` (or the defaults when None) when it is an :attr:`options_type`.

        Raises:
            InputError: options of another type, naming the expected one.
        """
        if options is None:
            return cls.options_type()
        if isinstance(options, cls.options_type):
            return options
        raise InputError(
            f"detector {cls.name or cls.__name__!r}: expected options of type {cls.options_type.__name__}, "
            f"got {type(options).__name__}; pass {cls.options_type.__name__}(...) or None"
        )

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when this detector can run on this machine, else why not."""
        return None

    # -- detection ----------------------------------------------------------------------------------------
    def detect(self, image: np.ndarray) -> Detections:
        """The people of one frame.

        Args:
            image: (H, W, 3) uint8 BGR.

        Returns:
            Detections in frame pixels, most confident first, at most ``options.max_detections``.

        Raises:
            InputError: not an (H, W, 3) uint8 array. BackendError: not active, or the runtime failed.
        """
        if not self._active:
            raise BackendError(f"{self!r} is not active; call activate() first or use it in a `with` block")
        if (
            not isinstance(image, np.ndarray)
            or image.dtype != np.uint8
            or image.ndim != 3
            or image.shape[2] != 3
        ):
            got = f"{image.dtype} {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
            raise InputError(f"detector: expected an (H, W, 3) uint8 BGR image, got {got}")
        if image.shape[0] == 0 or image.shape[1] == 0:
            self.last_check = FrameCheck()
            return Detections.empty()
        xyxy, scores, classes = self._detect(np.ascontiguousarray(image))
        with np.errstate(invalid="ignore", over="ignore"):
            keep = select(xyxy, scores, classes, self.options)
            self.last_check = frame_check(xyxy, scores, keep, image.shape[:2])
        return to_detections(xyxy[keep], scores[keep], image.shape[:2])

    @abstractmethod
    def _activate(self) -> None:
        """Create the session; called once per activation."""

    @abstractmethod
    def _deactivate(self) -> None:
        """Release what :meth:`_activate` created."""

    @abstractmethod
    def _detect(self, image: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Raw boxes of a validated C-contiguous (H, W, 3) uint8 frame: ``(x1 y1 x2 y2 (N, 4) float32 in frame
        pixels, scores (N,) float32, class ids (N,) int64 or None when every box is a person)``."""

    @property
    def label(self) -> str:
        """How notes and errors name this detector (a file name, a bundled detector's name)."""
        return getattr(self, "_label", None) or self.name

    def layout_note(self) -> str:
        """How this detector's output is read (network detectors: the layout and why), for notes and
        errors."""
        return "no output layout (a built-in detector)"

    def describe(self) -> str:
        """One line for run notes: what ran and how it keeps boxes."""
        o = self.options
        kept = "every class" if o.person_class is None else f"class {o.person_class}"
        return (
            f"{self!r}: {kept}, score >= {o.score_threshold:g}, NMS IoU {o.nms_iou:g}, "
            f"at most {o.max_detections} per frame"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
