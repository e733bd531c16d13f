"""Input repair for a stream: what a caller passes to :meth:`Pipeline.step` made usable, never raised.

:class:`InputRepair` owns the per-stream state the repairs need: the frame counter (the frame index when
the caller gives none or a bad one), the stream clock (the previous timestamp, which a non-finite or
decreasing one is replaced by ``+ 1/30 s``, and the first one, which the stages count from) and the last
known image size (box-only streams give it once). The frame and detection rules themselves are
:mod:`pairedge.runtime.validate`'s. Every repair is reported as a diagnostics note or a dropped count.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from pairedge.core.types import Detections
from pairedge.runtime.config import ValidationConfig
from pairedge.runtime.validate import (
    cap_people,
    image_size_problem,
    shorten,
    validate_detections,
    validate_frame,
)

#: The frame interval assumed when a timestamp must be replaced (seconds).
NOMINAL_DT = 1.0 / 30.0


class InputRepair:
    """Repairs one stream's inputs frame by frame.

    Args:
        validation: the frame and detection rules' thresholds.
        max_people: at most this many detections are kept per frame (None: no cap).

    Attributes:
        frames: frames seen since the stream was made (not reset by a scene cut).
        t0: the stream's first timestamp since the last clock restart (None before the first frame).
        last_t: the previous frame's (repaired) timestamp, None before the first frame.
        image_size: ``(W, H)`` of the last frame or the last usable ``image_size``, None when none known.
    """

    def __init__(self, validation: ValidationConfig, max_people: int | None) -> None:
        self.validation, self.max_people = validation, max_people
        self.frames = 0
        self.t0: float | None = None
        self.last_t: float | None = None
        self.image_size: tuple[int, int] | None = None

    def restart_clock(self, last_t: float | None = None) -> None:
        """A new stream clock (scene cut): the next timestamp is the new origin; ``last_t``, when given, is
        the time the next frame must not be before (a stream reset after a failed frame)."""
        self.t0, self.last_t = None, last_t

    def clock(self, frame_index: Any, timestamp: Any, notes: list[str]) -> tuple[int, float, float]:
        """Count a frame: ``(frame index, timestamp, seconds since the stream's first frame)``, repaired."""
        index = self._frame_index(frame_index, notes)
        self.frames += 1
        t = self._timestamp(timestamp, notes)
        if self.t0 is None:
            self.t0 = t
        # float seconds since the epoch are only good to 2.4e-7 s near 1.7e9; differences of such stamps
        # came out a little short of a hold time that the same clip from 0 met exactly
        return index, t, t - self.t0

    def frame(
        self, frame: Any, image_size: Any, frame_problem: str | None, box_only: bool, notes: list[str]
    ) -> tuple[np.ndarray | None, str | None, tuple[int, int] | None]:
        """The frame checked: ``(image or None, why the frame was dropped or None, (W, H) or None)``.

        ``frame_problem``: why ``frame`` is None when the caller had one (its drop reason instead of "no
        frame given"). ``box_only``: the features need no frame, so a missing one is not a dropped frame.
        """
        image, reason = validate_frame(frame, self.validation)
        size = self._size(image, image_size, notes)
        if frame is None and frame_problem is not None:
            reason = shorten(frame_problem, 300, text=True)
        if frame is None and box_only:
            if frame_problem is not None:
                notes.append(f"{reason} (not needed: box-only features)")
            reason = None
        return image, reason, size

    def detections(self, detections: Any, size: tuple[int, int] | None) -> tuple[Detections, dict[str, int]]:
        """The usable detections (malformed rows dropped, at most ``max_people``) and reason -> count
        dropped."""
        dets, dropped = validate_detections(detections, size, self.validation)
        dets, over = cap_people(dets, self.max_people)
        if over:
            dropped[f"over max_people={self.max_people} (kept the most confident)"] = over
        return dets, dropped

    def _frame_index(self, frame_index: Any, notes: list[str]) -> int:
        """The caller's frame index when it is a whole number, else the frame counter (reported)."""
        if frame_index is None:
            return self.frames
        try:
            if isinstance(frame_index, bool):
                raise TypeError("a bool")
            if isinstance(frame_index, numbers.Integral):
                return int(frame_index)
            value = float(frame_index)
            if value.is_integer() and not isinstance(frame_index, str | bytes):
                return int(value)
        except Exception:  # noqa: BLE001, S110 - any failure of a caller's object falls through to the report
            pass
        notes.append(f"frame_index {shorten(frame_index)} is not a whole number; used {self.frames}")
        return self.frames

    def _timestamp(self, timestamp: Any, notes: list[str]) -> float:
        problem = None
        try:
            t = float(timestamp)
        except OverflowError:
            t, problem = math.nan, "is beyond the float range"
        # TypeError, ValueError or whatever a caller's __float__ raises
        except Exception as exc:
            t, problem = math.nan, f"is not a number ({type(exc).__name__})"
        if problem is None and not math.isfinite(t):
            problem = "is not finite"
        elif problem is None and self.last_t is not None and t < self.last_t:
            problem = f"is before the previous one ({self.last_t:.6f})"
        if problem is not None:
            t = 0.0 if self.last_t is None else self.last_t + NOMINAL_DT
            notes.append(f"timestamp {shorten(timestamp)} {problem}; used {t:.6f}")
        self.last_t = t
        return t

    def _size(self, image: np.ndarray | None, image_size: Any, notes: list[str]) -> tuple[int, int] | None:
        if image is not None:
            self.image_size = (int(image.shape[1]), int(image.shape[0]))
        elif image_size is not None:
            checked = image_size_problem(image_size)
            if isinstance(checked, str):
                known = f"kept {self.image_size}" if self.image_size is not None else "no size known"
                notes.append(f"{checked}; {known}")
            else:
                self.image_size = checked
        return self.image_size
