"""The one optical-flow interface of the runtime.

A :class:`FlowBackend` computes dense flow between two grayscale frames at its own ``scale`` (1.0 = full
resolution, 0.5 = half width and height). Flow vectors are in pixels *of the scaled image*: to map a box
``x y w h`` onto the flow field multiply it by ``scale``; to turn a flow vector into full-resolution pixels
divide it by ``scale``. Backends keep their scaled inputs and their output in buffers reused from frame to
frame, so the array :meth:`FlowBackend.compute` returns is only valid until the next call (copy it to keep
it).

Every backend declares :attr:`FlowBackend.min_side`, the smallest scaled image side it computes flow for
(OpenCV's DIS refuses images below about 12 px); :meth:`FlowBackend.size_problem` says why a frame size is
too small, :meth:`FlowBackend.compute` raises :class:`~pairedge.core.errors.InputError` for it, and
:class:`~pairedge.runtime.flow.FlowStream` turns it into "no flow for this frame" with that reason.

The class declares everything the runtime asks of a backend, with defaults a CPU backend keeps:
:meth:`~FlowBackend.close` (nothing to release), :meth:`~FlowBackend.gpu_ms` (no GPU time),
:attr:`~FlowBackend.emulated`, :attr:`~FlowBackend.preset`, and the pooled contract:
:attr:`~FlowBackend.fuses_pooling` says whether the runtime asks :meth:`~FlowBackend.compute_pooled`
(per-box sums and the background grid, :class:`~pairedge.core.features.flowpool.PooledFlow`) instead of the
dense field; the default reduces the dense field on the CPU, a GPU backend reduces on the device.

Options are typed: each backend has a frozen ``Options`` dataclass (a :class:`FlowOptions`), and
``Backend(options)`` or ``Backend(scale=..., ...)`` builds it (:meth:`FlowBackend.make_options` checks them).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import cv2
import numpy as np
from pairedge.core.errors import BackendError, InputError
from pairedge.core.features.flowpool import PooledFlow, pooled_reference


@dataclass(frozen=True, kw_only=True)
class FlowOptions:
    """What every flow backend takes; each backend's ``Options`` adds its own fields (and defaults).

    Attributes:
        scale: resize factor in (0, 1] applied to both frames before the flow is computed.
    """

    scale: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.scale, int | float) and 0.0 < float(self.scale) <= 1.0):
            raise InputError(
                f"flow scale: expected a number in (0, 1], got {self.scale!r}; fix by passing e.g. 0.5"
            )
        object.__setattr__(self, "scale", float(self.scale))


@dataclass(frozen=True)
class PoolRequest:
    """What the feature spec needs pooled this frame.

    Attributes:
        boxes: (N, 4) float64 ``x y w h`` full-image boxes (the spec's usable rows, in their order).
        inset: the spec's ``pool_inset``; grid_step: the spec's ``grid_step`` (flow pixels).
    """

    boxes: np.ndarray
    inset: tuple[float, float] = (0.15, 0.05)
    grid_step: int = 8


def scaled_size(height: int, width: int, scale: float) -> tuple[int, int]:
    """(h, w) of an image of ``height x width`` resized by ``scale`` (at least 1 x 1)."""
    return max(1, int(round(height * scale))), max(1, int(round(width * scale)))


class FlowBackend(ABC):
    """Dense optical flow between consecutive grayscale frames.

    Subclasses set :attr:`name` and their ``Options``, implement :meth:`_flow` on already-scaled images and
    may override :meth:`unavailable_reason`. They never allocate per frame what could be reused.

    Args:
        options: the backend's ``Options``; or None and the options as keywords (a keyword given as None
            keeps that option's default).

    Raises:
        InputError: an option out of range, a keyword the backend does not take, or options of another
            backend.
    """

    name: ClassVar[str] = ""
    #: Smallest side (pixels, after scaling) of frames this backend computes flow for.
    min_side: ClassVar[int] = 1
    #: The frozen options dataclass of this backend (subclasses declare their own).
    Options: ClassVar[type[FlowOptions]] = FlowOptions
    #: True when the runtime should ask :meth:`compute_pooled` instead of the dense field (a fusing backend).
    fuses_pooling: bool = False
    #: The speed / accuracy preset of a backend that has presets (DIS), None for the others.
    preset: str | None = None

    def __init__(self, options: FlowOptions | None = None, **given: Any) -> None:
        self.options = self.make_options(options, **given)
        self.scale = self.options.scale
        self._small: list[np.ndarray] = []  # two reused resize targets (prev, cur)
        self._out: np.ndarray | None = None

    @classmethod
    def make_options(cls, options: FlowOptions | None = None, **given: Any) -> FlowOptions:
        """``options`` checked to be this backend's, or this backend's ``Options`` built from ``given``
        (keywords given as None keep their default).

        Raises:
            InputError: an unknown keyword (the message lists the accepted ones), options of another
                backend, both options and keywords, or a value out of range.
        """
        given = {k: v for k, v in given.items() if v is not None}
        if options is not None:
            if given:
                raise InputError(
                    f"flow backend {cls.name!r}: give {cls.__name__}.Options or keywords, not both "
                    f"(got options and {sorted(given)})"
                )
            if not isinstance(options, cls.Options):
                raise InputError(
                    f"flow backend {cls.name!r}: expected {cls.__name__}.Options, got "
                    f"{type(options).__qualname__}"
                )
            return options
        accepted = [f.name for f in dataclasses.fields(cls.Options)]
        unknown = sorted(set(given) - set(accepted))
        if unknown:
            raise InputError(f"flow backend {cls.name!r}: unknown option(s) {unknown}; accepted: {accepted}")
        return cls.Options(**given)

    @classmethod
    def options_for(cls, scale: float, preset: str | None = None) -> FlowOptions:
        """This backend's options for a pipeline's flow settings
        (:class:`~pairedge.runtime.config.FlowConfig`): ``scale``, and ``preset`` for a backend that has
        presets (None: its default; the others ignore it)."""
        return cls.make_options(scale=scale)

    @classmethod
    def unavailable_reason(cls, options: FlowOptions | None = None) -> str | None:
        """None when the backend can run on this machine with ``options`` (None: its defaults), else why not
        (shown by the registry)."""
        return None

    @property
    def emulated(self) -> bool:
        """True when the flow runs on an emulated device (its timings are not GPU ones)."""
        return False

    def gpu_ms(self) -> float | None:
        """GPU time (CUDA events) of the last call, ms; None for CPU backends and emulated devices."""
        return None

    def close(self) -> None:
        """Release what the backend holds beyond Python memory (device memory, a context). Idempotent."""
        return None  # a CPU backend holds only numpy buffers

    def scaled_shape(self, height: int, width: int) -> tuple[int, int]:
        """Shape (h, w) of the flow field this backend returns for ``height x width`` frames."""
        return scaled_size(height, width, self.scale)

    def size_problem(self, height: int, width: int) -> str | None:
        """Why frames of ``height x width`` (full resolution) are too small for this backend, or None."""
        h, w = self.scaled_shape(height, width)
        if min(h, w) >= self.min_side:
            return None
        return (
            f"frame {width}x{height} px at flow scale {self.scale:g} is {w}x{h} px, below the "
            f"{self.min_side} px per side that {type(self).__name__} needs; no flow for it (raise the flow "
            "scale or the resolution)"
        )

    def output_buffer(self, height: int, width: int) -> np.ndarray:
        """The reused (h, w, 2) float32 output buffer for scaled frames of ``height x width``, zeroed."""
        if self._out is None or self._out.shape[:2] != (height, width):
            self._out = np.zeros((height, width, 2), np.float32)
        else:
            self._out.fill(0.0)
        return self._out

    def resize(self, gray: np.ndarray, slot: int) -> np.ndarray:
        """``gray`` resized by :attr:`scale` into reused buffer ``slot`` (0 or 1); no copy at scale 1."""
        if self.scale == 1.0:
            return gray
        h, w = self.scaled_shape(*gray.shape[:2])
        while len(self._small) <= slot:
            self._small.append(np.empty((0, 0), np.uint8))
        if self._small[slot].shape != (h, w):
            self._small[slot] = np.empty((h, w), np.uint8)
        return cv2.resize(gray, (w, h), dst=self._small[slot], interpolation=cv2.INTER_AREA)

    def to_gray(self, image: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Grayscale of an (H, W, 3) BGR uint8 frame into ``out`` ((H, W) uint8): OpenCV's ITU-R 601 luma.

        A backend whose features were defined on another conversion overrides it (Farneback: PIL's, as the
        released ``liang2026`` code). :class:`~pairedge.runtime.flow.FlowStream` calls it once per frame.
        """
        return cv2.cvtColor(image, cv2.COLOR_BGR2GRAY, dst=out)

    def compute(self, prev_gray: np.ndarray, gray: np.ndarray) -> np.ndarray:
        """Flow from ``prev_gray`` to ``gray``.

        Args:
            prev_gray, gray: (H, W) uint8 grayscale frames of the same shape.

        Returns:
            (h, w, 2) float32 flow at :attr:`scale` (``h, w = scaled_shape(H, W)``), x then y component,
            in scaled pixels; a reused buffer, valid until the next call.
        """
        check_gray(prev_gray, "prev_gray")
        check_gray(gray, "gray")
        if prev_gray.shape != gray.shape:
            raise InputError(
                f"flow: expected two frames of the same shape, got {prev_gray.shape} and {gray.shape}; "
                "fix by resizing, or start a new stream when the camera resolution changes"
            )
        return self.compute_scaled(self.resize(prev_gray, 0), self.resize(gray, 1))

    def compute_scaled(self, prev_small: np.ndarray, small: np.ndarray) -> np.ndarray:
        """Flow between frames already resized by :attr:`scale` ((h, w) uint8, C-contiguous).

        Raises:
            InputError: a side is below :attr:`min_side`.
            BackendError: OpenCV failed on the frames (the message says why).
        """
        h, w = small.shape[:2]
        if min(h, w) < self.min_side:
            raise InputError(
                f"flow: expected scaled frames at least {self.min_side} px on a side for "
                f"{type(self).__name__}, got {w}x{h}; raise the flow scale or the resolution"
            )
        out = self.output_buffer(h, w)
        try:
            self._flow(prev_small, small, out)
        except cv2.error as exc:
            raise BackendError(f"flow: {type(self).__name__} failed on {w}x{h} frames ({exc.err})") from None
        return out

    def compute_pooled(self, prev_small: np.ndarray, small: np.ndarray, request: PoolRequest) -> PooledFlow:
        """Flow between two scaled (h, w) uint8 frames reduced to ``request``'s per-box sums and background
        grid. This default pools the dense field on the CPU
        (:func:`~pairedge.core.features.flowpool.pooled_reference`); a fusing backend reduces on the device,
        so only N x 4 sums and the grid leave it."""
        field = self.compute_scaled(prev_small, small)
        return pooled_reference(field, request.boxes, self.scale, request.inset, request.grid_step)

    @abstractmethod
    def _flow(self, prev_small: np.ndarray, small: np.ndarray, out: np.ndarray) -> None:
        """Write the flow between two scaled (h, w) uint8 frames into ``out`` (h, w, 2) float32 (zeroed)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scale={self.scale})"


def check_gray(image: np.ndarray, what: str) -> None:
    """Raise InputError unless ``image`` is an (H, W) uint8 array."""
    if not isinstance(image, np.ndarray) or image.ndim != 2 or image.dtype != np.uint8 or image.size == 0:
        got = (
            f"{image.dtype} array of shape {image.shape}"
            if isinstance(image, np.ndarray)
            else type(image).__name__
        )
        raise InputError(
            f"flow {what}: expected an (H, W) uint8 grayscale image, got {got}; "
            "fix by converting with cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)"
        )
