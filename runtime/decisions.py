"""The decision rule, written once: stage 1's gate and stage 2's top-1 class.

The pipeline (:mod:`pairedge.runtime.pipeline`), the comparator (:mod:`pairedge.compare.comparator`:
calibrate's held-out report, bench's gate, parity's labels and task levels) and parity's model-only replay
all decide through these functions, so "the gate is open" and "the label" mean the same thing everywhere.

- gate: ``p_interact >= tau``, with ``p_interact`` the float32 sigmoid of the logit difference
  (:func:`interact_probability`); the pipeline applies it to the smoothed probability.
- top-1: the argmax of the stage-2 logits (or of the smoothed class probabilities; argmax is the same
  either way for one row, since softmax is monotone).
"""

from __future__ import annotations

import numpy as np

#: stage-2 label id of a pair the gate closes.
NO_LABEL = -1


def interact_probability(logits: np.ndarray) -> np.ndarray:
    """(N,) float32 probability of class 1 ("interacting") from (N, 2) logits, or a sigmoid of (N, 1)."""
    x = np.asarray(logits, np.float32)
    z = x[:, 0] if x.shape[1] == 1 else x[:, 1] - x[:, 0]
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-z))).astype(np.float32)


def gate_open(p_interact: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """(N,) bool: the gate is open for each (N,) probability (``p >= tau``; ``tau`` one number or (N,))."""
    return np.asarray(p_interact) >= tau


def top1(scores: np.ndarray) -> np.ndarray:
    """(N,) int64 top-1 class of (N, C) stage-2 logits or probabilities (the first on a tie)."""
    return np.asarray(scores).argmax(axis=1).astype(np.int64)


def gated_labels(logits1: np.ndarray, logits2: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """(N,) int64 label ids of the raw (unsmoothed) rule: stage 2's top-1 where stage 1's gate opens, else
    :data:`NO_LABEL`. logits1: (N, 2) or (N, 1); logits2: (N, C)."""
    return np.where(gate_open(interact_probability(logits1), tau), top1(logits2), NO_LABEL).astype(np.int64)
