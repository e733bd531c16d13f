"""A guard against silently wrong detectors: the first frames' boxes judged before any result is written.

A detector read in the wrong layout does not fail: it turns numbers into boxes. A raw YOLOX export read as
decoded gives boxes a few pixels wide at the image corner; a graph whose outputs are NaN gives nothing at
all. Either way a run would go on and report interactions between phantoms, or nothing, with exit 0.

:func:`guarded` reads the first :attr:`GuardOptions.frames` frames of a detector stream ahead (holding at
most :attr:`GuardOptions.max_bytes` of images), judges what the detector produced on them
(:class:`DetectorGuard`), and only then lets them go on to the pipeline. A detector fails the judgement when:

- its boxes are mostly implausible: a share of at least :attr:`GuardOptions.max_implausible` of the kept
  boxes is narrower or shorter than :data:`MIN_SIDE` pixels or lies mostly outside the frame;
- it never gave a finite candidate while giving non-finite ones (NaN / inf outputs).

An empty scene (no boxes at all) is plausible. The failure is one :class:`DetectorOutputError` naming the
detector, the layout it assumed and why, and how to override it. Afterwards the guard only counts
(non-finite candidates per frame, for the run's diagnostics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
from pairedge.core.errors import InputError, ModelError

#: A person box narrower or shorter than this many frame pixels is implausible (a person 5 px wide is about
#: 12 px tall: nothing a detector finds reliably, nor a feature can use). Real YOLOX-Nano boxes on PETS 2009:
#: the 1st percentile of the shorter side is 16 px.
MIN_SIDE = 5.0


class DetectorOutputError(ModelError):
    """A detector's output is not plausible person boxes (wrong layout, broken export)."""


@dataclass(frozen=True)
class FrameCheck:
    """What one frame of a detector produced.

    Attributes:
        candidates: raw rows the network returned. nonfinite: of them, rows with a non-finite box or score.
        boxes: boxes kept (threshold, person class, NMS, cap). small: of them, a side below :data:`MIN_SIDE`
        (frame pixels). outside: of them, not small and less than half inside the frame.
    """

    candidates: int = 0
    nonfinite: int = 0
    boxes: int = 0
    small: int = 0
    outside: int = 0


def frame_check(
    xyxy: np.ndarray, scores: np.ndarray, keep: np.ndarray, frame_size: tuple[int, int]
) -> FrameCheck:
    """The :class:`FrameCheck` of one frame: ``xyxy`` (N, 4) and ``scores`` (N,) raw candidates in frame
    pixels, ``keep`` the indices kept, ``frame_size`` (height, width)."""
    b = np.asarray(xyxy, np.float64).reshape(-1, 4)
    s = np.asarray(scores, np.float64).reshape(-1)
    finite = np.isfinite(b).all(axis=1)
    if len(s) == len(b):
        finite &= np.isfinite(s)
    k = b[np.asarray(keep, np.int64)]
    w, h = k[:, 2] - k[:, 0], k[:, 3] - k[:, 1]
    fh, fw = frame_size
    inside_w = np.clip(np.minimum(k[:, 2], fw) - np.maximum(k[:, 0], 0), 0, None)
    inside_h = np.clip(np.minimum(k[:, 3], fh) - np.maximum(k[:, 1], 0), 0, None)
    area = np.maximum(w, 0) * np.maximum(h, 0)
    outside = inside_w * inside_h < 0.5 * area
    small = np.minimum(w, h) < MIN_SIDE
    return FrameCheck(
        candidates=len(b),
        nonfinite=int((~finite).sum()),
        boxes=len(k),
        small=int(small.sum()),
        outside=int((outside & ~small).sum()),
    )


@dataclass(frozen=True)
class GuardOptions:
    """How the first frames are judged.

    Attributes:
        frames: frames read ahead and judged (1 to 100).
        max_bytes: at most this many bytes of images held while reading ahead (fewer frames when they are big;
            at least one).
        max_implausible: the share of implausible kept boxes at which the detector fails, in (0, 1].
        enabled: False turns the judgement off (the counts stay).
    """

    frames: int = 8
    max_bytes: int = 64 << 20
    max_implausible: float = 0.5
    enabled: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.frames, bool) or not isinstance(self.frames, int) or not 1 <= self.frames <= 100:
            raise InputError(f"guard frames: expected an integer in [1, 100], got {self.frames!r}")
        if not 0.0 < self.max_implausible <= 1.0:
            raise InputError(
                f"guard max_implausible: expected a share in (0, 1], got {self.max_implausible!r}"
            )


@dataclass
class DetectorGuard:
    """Judges a detector from its :class:`FrameCheck` per frame (see the module docstring).

    Args:
        describe: the detector and the layout it assumed, for the error (``"yolox_nano.onnx, layout yolox
            (...)"``).
        options: :class:`GuardOptions`.
    """

    describe: str
    options: GuardOptions = field(default_factory=GuardOptions)
    frames: int = 0
    candidates: int = 0
    nonfinite: int = 0
    nonfinite_frames: int = 0
    boxes: int = 0
    small: int = 0
    outside: int = 0
    judged: bool = False

    def observe(self, check: FrameCheck) -> None:
        """Count one frame."""
        self.frames += 1
        self.candidates += check.candidates
        self.nonfinite += check.nonfinite
        self.nonfinite_frames += check.nonfinite > 0
        if not self.judged:
            self.boxes += check.boxes
            self.small += check.small
            self.outside += check.outside

    def judge(self) -> None:
        """Judge the frames seen so far (once; later calls do nothing).

        Raises:
            DetectorOutputError: the output is not plausible (one line: what, why, how to override).
        """
        if self.judged:
            return
        self.judged = True
        if not self.options.enabled or self.frames == 0:
            return
        n = self.frames
        how = (
            "pass --detector-layout NAME if the layout is wrong (pairedge run --help lists them), or check "
            "the export"
        )
        if self.boxes == 0 and self.nonfinite and self.nonfinite == self.candidates:
            raise DetectorOutputError(
                f"detector {self.describe}: every candidate of the first {n} frame(s) is NaN or inf "
                f"({self.nonfinite:,} of {self.candidates:,}): no finite box at all; {how}"
            )
        bad = self.small + self.outside
        if self.boxes and bad >= self.options.max_implausible * self.boxes:
            raise DetectorOutputError(
                f"detector {self.describe}: {bad:,} of its {self.boxes:,} boxes in the first {n} frame(s) "
                f"are not plausible people ({self.small:,} narrower or shorter than {MIN_SIDE:g} px, "
                f"{self.outside:,} mostly outside the frame); its output is likely read in the wrong layout: "
                f"{how}"
            )

    def notes(self) -> list[str]:
        """Lines for the run's notes (non-finite outputs)."""
        if not self.nonfinite:
            return []
        return [
            f"detector: {self.nonfinite:,} of {self.candidates:,} raw candidates were NaN or inf, on "
            f"{self.nonfinite_frames:,} of {self.frames:,} frames (dropped)"
        ]


T = TypeVar("T")


def guarded(
    items: Iterable[T], guard: DetectorGuard, check: Callable[[], FrameCheck], size: Callable[[T], int]
) -> Iterator[T]:
    """``items`` unchanged, the first ones held back until the guard judged them.

    Args:
        items: the stream; producing an item runs the detector on it (so ``check()`` then describes it).
        guard: the judge.
        check: the detector's :class:`FrameCheck` of the item just produced.
        size: bytes an item holds (its image), for :attr:`GuardOptions.max_bytes`.

    Raises:
        DetectorOutputError: from :meth:`DetectorGuard.judge`, before any held item is yielded.
    """
    held: list[T] = []
    held_bytes = 0
    iterator = iter(items)
    for item in iterator:
        guard.observe(check())
        held.append(item)
        held_bytes += size(item)
        if len(held) >= guard.options.frames or held_bytes >= guard.options.max_bytes:
            break
    guard.judge()
    yield from held
    held.clear()
    for item in iterator:
        guard.observe(check())
        yield item
