"""Evaluate per-frame predictions after the runtime's per-pair temporal smoothing.

The runtime (:mod:`pairedge.runtime.pipeline`) smooths every pair's class probabilities with an exponential
moving average keyed by the pair's track ids (:class:`pairedge.runtime.smoothing.PairSmoother`), one update
per frame, the state dropped when the pair is not scored on a frame. :func:`smooth_like_runtime` replays
recorded per-frame probabilities through that very class, frame by frame, so a benchmark can report the
number the deployed pipeline produces: causal (each output uses only the pair's current and past frames).
"""

from __future__ import annotations

import numpy as np
from pairedge.core.errors import InputError
from pairedge.runtime.config import SmoothingConfig
from pairedge.runtime.smoothing import PairSmoother


def _check(groups: np.ndarray, frame: np.ndarray, pairs: np.ndarray, probs: np.ndarray) -> None:
    n = len(probs)
    if probs.ndim != 2 or not (len(groups) == len(frame) == len(pairs) == n) or pairs.shape[1:] != (2,):
        raise InputError(
            "smoothing replay: expected groups (N,), frame (N,), pairs (N, 2) and probs (N, C) with the "
            f"same N, got {groups.shape}, {frame.shape}, {pairs.shape}, {probs.shape}"
        )


def _replay_group(
    frame: np.ndarray, pairs: np.ndarray, probs: np.ndarray, config: SmoothingConfig
) -> np.ndarray:
    """Smooth one stream's rows (already ordered by frame, then pair). Returns (n, C) float32."""
    smoother = PairSmoother(probs.shape[1], config)
    out = np.empty_like(probs, dtype=np.float32)
    starts = np.searchsorted(frame, np.arange(frame[0], frame[-1] + 2))
    for lo, hi in zip(starts[:-1], starts[1:], strict=True):  # every frame, also the ones without pairs
        smoother.smooth_interact(pairs[lo:hi], np.ones(hi - lo, np.float32))
        if hi > lo:
            out[lo:hi] = smoother.smooth_probs(np.arange(hi - lo), probs[lo:hi])
    return out


def smooth_like_runtime(
    groups: np.ndarray,
    frame: np.ndarray,
    pairs: np.ndarray,
    probs: np.ndarray,
    config: SmoothingConfig | None = None,
) -> np.ndarray:
    """Per-pair EMA of class probabilities exactly as the runtime applies it (all pairs pass the gate).

    Args:
        groups: (N,) stream ids (sequences); each stream gets its own smoother state.
        frame: (N,) int frame numbers; every frame between a stream's first and last counts as a step,
            whether or not it has rows (like the runtime, which updates on every frame).
        pairs: (N, 2) int64 track ids ``id_a < id_b`` (non-negative, below 2**31), unique within a frame.
        probs: (N, C) float raw per-frame class probabilities.
        config: the runtime's :class:`SmoothingConfig` (None = its defaults).

    Returns:
        (N, C) float32 smoothed probabilities, rows in the input order.
    """
    groups, frame = np.asarray(groups), np.asarray(frame, np.int64)
    pairs, probs = np.asarray(pairs, np.int64), np.asarray(probs, np.float32)
    _check(groups, frame, pairs, probs)
    config = config or SmoothingConfig()
    out = np.empty_like(probs)
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        idx = idx[np.lexsort((pairs[idx, 1], pairs[idx, 0], frame[idx]))]
        out[idx] = _replay_group(frame[idx], pairs[idx], probs[idx], config)
    return out
