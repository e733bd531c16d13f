"""Whether the detector's box shape says anything about the person.

A seated person's box is wider for its height than a standing one's, and models use that ratio (the spec's
``box_shape_names``). A sliding-window detector (ACF, HOG, DPM and the public detections of many benchmarks)
draws every box at one fixed width-to-height ratio: PETS 2009's ACF boxes are all 0.4407 wide per unit of
height, wider than the ~0.35 of a tight box around a walking person. The ratio then carries no posture, yet
its fixed value still moves the model (on PETS S2.L1 raw detections it is what labels walking pairs
"sitting together"). :class:`AspectMonitor` recognises such a detector from the stream's own boxes, and
:func:`neutral_columns` gives the values that replace those columns: the model's training mean, the value
at which a z-scored input carries no evidence (as ``--ignore-features`` does inside a model).
:class:`BoxShapePolicy` is the pipeline's use of both (``PipelineConfig.box_shape``).

The state is a fixed-size ring of the latest box ratios, so the cost per frame is bounded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.features import FeatureSpec, PairFeatures

#: ``PipelineConfig.box_shape`` values: neutralise when the detector is fixed-ratio, never, or always.
MODES = ("auto", "off", "ignore")


class AspectMonitor:
    """Running test of "every box has the same width-to-height ratio" over a stream's detections.

    Args:
        capacity: ratios kept (the most recent boxes).
        min_boxes: boxes needed before the detector is judged (until then: not fixed).
        tolerance: the detector is fixed-ratio when the 5th and 95th percentiles of the ratios differ by at
            most this fraction of their median. Fixed-ratio detectors differ only by float rounding
            (PETS ACF: 1e-5); a tight box around a person varies by tens of percent as the limbs move.
    """

    def __init__(self, capacity: int = 512, min_boxes: int = 50, tolerance: float = 0.005) -> None:
        if capacity < min_boxes or min_boxes < 2 or not 0 < tolerance < 1:
            raise ValueError("AspectMonitor: expected capacity >= min_boxes >= 2 and 0 < tolerance < 1")
        self.capacity, self.min_boxes, self.tolerance = capacity, min_boxes, tolerance
        self.reset()

    def reset(self) -> None:
        """Forget every box (a new camera or detector)."""
        self._ratio = np.zeros(self.capacity, np.float64)
        self._count = 0
        self.fixed = False
        self.aspect = float("nan")

    def update(self, boxes: np.ndarray, image_size: tuple[int, int] | None) -> bool:
        """Add a frame's detector boxes (N, 4) ``x y w h`` (finite, positive size: validated upstream).

        Boxes within 1 px of the image border are skipped (clipping changed their shape). Tracker
        predictions (coasted boxes) must not be passed: they are not the detector's.

        Returns:
            True when the verdict (:attr:`fixed`) changed with this frame.
        """
        b = np.asarray(boxes, np.float64).reshape(-1, 4)
        if image_size is not None and len(b):
            w, h = image_size
            inside = (b[:, 0] > 1) & (b[:, 1] > 1) & (b[:, 0] + b[:, 2] < w - 1) & (b[:, 1] + b[:, 3] < h - 1)
            b = b[inside]
        b = b[-self.capacity :]
        if not len(b):
            return False
        slots = (self._count + np.arange(len(b))) % self.capacity
        self._ratio[slots] = b[:, 2] / b[:, 3]
        self._count += len(b)
        before = self.fixed
        self._judge()
        return self.fixed != before

    def _judge(self) -> None:
        n = min(self._count, self.capacity)
        if n < self.min_boxes:
            self.fixed, self.aspect = False, float("nan")
            return
        ranks = [(n - 1) // 20, (n - 1) // 2, (n - 1) * 19 // 20]  # 5th, 50th, 95th percentiles
        lo, mid, hi = np.partition(self._ratio[:n], ranks)[ranks]  # ~5x cheaper than np.percentile
        self.aspect = float(mid)
        self.fixed = bool(hi - lo <= self.tolerance * mid)


def neutral_columns(
    stage2_names: Sequence[str], box_shape_names: frozenset[str], norm_mean: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """The stage-2 columns that hold box shape and the model's training mean of each.

    Args:
        stage2_names: (F,) the spec's stage-2 column names. box_shape_names: the spec's box-shape columns.
        norm_mean: (F,) the stage-2 model's z-score means (its training mean of every column).

    Returns:
        ``(columns (K,) int64, values (K,) float32)``; empty when the spec has no box-shape column or the
        model carries no means of the right length.
    """
    cols = np.array([i for i, n in enumerate(stage2_names) if n in box_shape_names], np.int64)
    if not len(cols) or len(norm_mean) != len(stage2_names):
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    return cols, np.asarray(norm_mean, np.float32)[cols]


class BoxShapePolicy:
    """``PipelineConfig.box_shape`` for one stream: whether stage 2's box-shape columns are set to the
    model's training mean ("ignore" always, "off" never, "auto" once the detector is judged fixed-ratio).

    Args:
        mode: one of :data:`MODES`.
        spec: the model's feature spec (``stage2_names``, ``box_shape_names``).
        norm_mean: (F,) the stage-2 model's z-score means.

    Raises:
        InputError: ``mode="ignore"`` for a model without box-shape columns with training means.
    """

    def __init__(self, mode: str, spec: FeatureSpec, norm_mean: Sequence[float]) -> None:
        self.mode = mode
        self.columns, self.means = neutral_columns(spec.stage2_names, spec.box_shape_names, norm_mean)
        if mode == "ignore" and not len(self.columns):
            raise InputError(
                f"box_shape='ignore': the model ({spec.name} v{spec.version}) has no box-shape "
                "columns with training means to use instead; use 'auto' or 'off'"
            )
        #: Detects a fixed-ratio detector (``mode="auto"`` and a model with box-shape columns), else None.
        self.monitor = AspectMonitor() if mode == "auto" and len(self.columns) else None
        self._given: tuple[bool, float] | None = None  # a replay's (ignored, aspect) for this frame

    @property
    def fixed_ratio(self) -> float | None:
        """The width / height ratio at which the detector draws every box once judged fixed-ratio (box
        shape then ignored); None otherwise."""
        if self._given is not None:  # a replay: the reference's verdict
            return self._given[1] if math.isfinite(self._given[1]) else None
        return self.monitor.aspect if self.monitor is not None and self.monitor.fixed else None

    @property
    def ignored(self) -> bool:
        """The box-shape columns are set to the training mean for the current frame."""
        if self._given is not None:
            return self._given[0]
        return self.mode == "ignore" or self.fixed_ratio is not None

    def observe(self, boxes: np.ndarray, image_size: tuple[int, int] | None) -> str | None:
        """Judge a frame's (N, 4) ``x y w h`` detector boxes (validated, no coasted ones); the diagnostics
        note when the verdict changed, else None."""
        self._given = None
        if self.monitor is None or not self.monitor.update(boxes, image_size):
            return None
        if self.fixed_ratio is not None:
            return (
                f"detector draws every box at one width/height ratio ({self.fixed_ratio:.3f}): box-shape "
                "features set to the model's training mean"
            )
        return "detector box shapes vary again: box-shape features used"

    def give(self, ignored: bool, aspect: float) -> None:
        """A replay's frame: the reference's verdict (``aspect`` NaN: not fixed-ratio); the monitor rests."""
        self._given = (bool(ignored), float(aspect))

    def neutralise(self, features: PairFeatures) -> None:
        """In place: the box-shape columns of ``features.stage2`` at the training mean when ignored."""
        if len(features) and self.ignored:
            features.stage2[:, self.columns] = self.means

    def reset(self) -> None:
        """A new stream: forget the boxes judged and any replayed verdict."""
        if self.monitor is not None:
            self.monitor.reset()
        self._given = None

    def describe(self) -> str:
        """The mode, and whether it is ignoring box shape now: ``"auto (now ignored: fixed-ratio
        detector)"``."""
        return self.mode + (" (now ignored: fixed-ratio detector)" if self.fixed_ratio is not None else "")
