"""Calibration samples: the pair features one model folder sees, per stage, with class and motion per row.

A :class:`StageSamples` holds the rows of one stage (stage 1: every pair the gate scores; stage 2: the pairs
the stage-1 gate passes at run time plus the truth-labelled pairs). Every row carries

- ``cls``: the class used for stratification: the truth where known, else the fp32 model's prediction;
- ``truth``: the truth class id (-1 unknown);
- ``motion``: a motion magnitude (pixels/s or the spec's flow magnitude; NaN when the features hold none);
- ``group``: the sequence / scene the row comes from (splits never separate one sequence);
- ``gated`` (stage 2, optional): whether the fp32 stage-1 gate passed the pair at run time (the rows stage 2
  classifies in the pipeline and ``parity check`` judges); None when unknown (features files).

:func:`check_stage` rejects what cannot calibrate: zero rows, NaN/inf features, one class only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pairedge.core.errors import InputError

#: Feature columns (by name, first match wins) that measure how fast a pair moves, per stage.
MOTION_COLUMNS = {
    1: ("mean_speed", "relative_speed"),
    2: ("pair_mean_speed", "mean_flow_magnitude_over_mean_area", "pair_relative_speed"),
}


@dataclass(frozen=True)
class StageSamples:
    """Rows of one stage.

    Attributes:
        stage: 1 or 2.
        X: (N, F) float32 raw feature values (the model's input).
        cls: (N,) int64 stratification class (truth, else fp32 prediction).
        truth: (N,) int64 truth class id, -1 where unknown.
        motion: (N,) float32 motion magnitude (NaN where unknown).
        group: (N,) str sequence id of each row.
        labels: class names of this stage's model.
        gated: (N,) bool, the fp32 gate passed the pair (stage-2 rows from a pipeline), or None.
    """

    stage: int
    X: np.ndarray
    cls: np.ndarray
    truth: np.ndarray
    motion: np.ndarray
    group: np.ndarray
    labels: tuple[str, ...]
    gated: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.X.shape[0])

    def subset(self, index: np.ndarray) -> StageSamples:
        """Rows selected by a boolean mask or an index array."""
        return StageSamples(
            self.stage,
            self.X[index],
            self.cls[index],
            self.truth[index],
            self.motion[index],
            self.group[index],
            self.labels,
            None if self.gated is None else self.gated[index],
        )

    @staticmethod
    def concat(parts: Sequence[StageSamples]) -> StageSamples:
        """Rows of several collections of the same stage and labels, in order."""
        if not parts:
            raise InputError("no calibration samples to combine")
        first = parts[0]
        return StageSamples(
            first.stage,
            np.concatenate([p.X for p in parts]).astype(np.float32),
            np.concatenate([p.cls for p in parts]).astype(np.int64),
            np.concatenate([p.truth for p in parts]).astype(np.int64),
            np.concatenate([p.motion for p in parts]).astype(np.float32),
            np.concatenate([p.group for p in parts]).astype(str),
            first.labels,
            None
            if any(p.gated is None for p in parts)
            else np.concatenate([p.gated for p in parts]).astype(bool),
        )


def motion_column(names: Sequence[str], stage: int) -> int | None:
    """Index of the feature column used as motion magnitude, or None when the spec has none."""
    for name in MOTION_COLUMNS[stage]:
        if name in names:
            return list(names).index(name)
    return None


def motion_of(X: np.ndarray, names: Sequence[str], stage: int) -> np.ndarray:
    """(N,) float32 motion magnitude of (N, F) raw features (absolute value; NaN without a motion column)."""
    col = motion_column(names, stage)
    if col is None:
        return np.full(len(X), np.nan, np.float32)
    return np.abs(X[:, col]).astype(np.float32)


def check_stage(samples: StageSamples, *, source: str) -> None:
    """Raise InputError when ``samples`` cannot calibrate: no rows, non-finite features, one class only."""
    where = f"{source}: stage {samples.stage}"
    if len(samples) == 0:
        raise InputError(
            f"{where}: zero calibration samples; give scenes, a video with detections or a features file "
            "that contain pairs of people"
        )
    bad = ~np.isfinite(samples.X)
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])
        raise InputError(
            f"{where}: {int(bad.any(axis=1).sum())} sample(s) hold NaN or inf features (first: row {row}, "
            f"column {col}); clean the features file or drop those rows"
        )
    present = np.unique(samples.cls)
    if len(present) < 2:
        name = samples.labels[int(present[0])] if len(present) else "?"
        raise InputError(
            f"{where}: every calibration sample is of one class ({name!r}); calibration needs samples of "
            f"several classes of {list(samples.labels)}: add scenes or sequences with other interactions"
        )
