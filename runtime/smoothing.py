"""Per-pair temporal smoothing: an exponential moving average keyed by the pair ``(id_a, id_b)``.

Two values are smoothed per pair: the stage-1 probability (every frame the pair is scored) and the stage-2
class probabilities (the frames it passes the gate). A third, optional piece of state is the time since
which the pair's gate has been open without a break (:meth:`PairSmoother.confirm`): a link is reported
only after it has held for ``confirm_s`` seconds, so two strangers who cross or pass for a moment are not
linked. A pair's state is evicted as soon as it is not scored
for more than ``grace_frames`` frames, i.e. when either of its tracks disappears, and the state never holds
more than ``max_pairs`` pairs (least recently seen go first), so memory stays flat on endless streams.
Everything is vectorised over the frame's pairs (sorted int64 keys and ``searchsorted``).
"""

from __future__ import annotations

import numpy as np
from pairedge.runtime.config import SmoothingConfig

#: Slack of the hold-time comparison, seconds: far below any frame period (33 ms at 30 FPS), far above the
#: rounding of float timestamps (2.4e-7 s for epoch seconds near 1.7e9).
HOLD_TOLERANCE_S = 1e-6


def pair_keys(pairs: np.ndarray) -> np.ndarray:
    """(M,) int64 keys ``id_a * 2**32 + id_b`` of (M, 2) non-negative ids below 2**31."""
    p = np.asarray(pairs, np.int64).reshape(-1, 2)
    return (p[:, 0] << 32) | p[:, 1]


class PairSmoother:
    """EMA state of the pairs of one stream.

    Args:
        num_classes: C, width of the stage-2 probabilities.
        config: :class:`SmoothingConfig`; None for the defaults.
    """

    def __init__(self, num_classes: int, config: SmoothingConfig | None = None) -> None:
        self.config = config or SmoothingConfig()
        self.num_classes = num_classes
        self.reset()

    def reset(self) -> None:
        """Forget every pair."""
        num_classes = self.num_classes
        self._keys = np.zeros(0, np.int64)  # sorted
        self._p = np.zeros(0, np.float32)
        self._probs = np.zeros((0, num_classes), np.float32)
        self._has_probs = np.zeros(0, bool)
        self._seen = np.zeros(0, np.int64)  # frame counter of the last update
        self._since = np.zeros(0, np.float64)  # timestamp the gate opened (NaN: closed)
        self._frame = -1
        self._slot = np.zeros(0, np.int64)  # this frame's pairs -> state rows

    def __len__(self) -> int:
        return len(self._keys)

    def smooth_interact(self, pairs: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Start a frame: smooth the stage-1 probabilities of all its scored pairs.

        Args:
            pairs: (M, 2) int64 unique ids ``id_a < id_b``, each in [0, 2**31).
            p: (M,) float32 raw probabilities.

        Returns:
            (M,) float32 smoothed probabilities. Pairs not in ``pairs`` age by one frame and are evicted
            after ``grace_frames``.
        """
        self._frame += 1
        keys = pair_keys(pairs)
        a = np.float32(self.config.alpha)
        if len(keys) == len(self._keys) and np.array_equal(keys, self._keys):
            # steady state: the same pairs as last frame, in the same (sorted) order; nothing to merge
            out = a * np.asarray(p, np.float32) + (1 - a) * self._p
            self._p = out.copy()  # the caller owns `out`
            self._seen.fill(self._frame)
            self._slot = np.arange(len(keys))
            return out
        found, idx = self._lookup(keys)
        out = np.asarray(p, np.float32).copy()
        out[found] = a * out[found] + (1 - a) * self._p[idx[found]]
        self._merge(keys, found, idx, out)
        return out

    def smooth_probs(self, rows: np.ndarray, probs: np.ndarray) -> np.ndarray:
        """Smooth the stage-2 probabilities of some of this frame's pairs.

        Args:
            rows: (G,) int64 indices into the ``pairs`` of the last :meth:`smooth_interact` call.
            probs: (G, C) float32 raw probabilities.

        Returns:
            (G, C) float32 smoothed probabilities (rows sum to 1 when the inputs do).
        """
        slots = self._slot[np.asarray(rows, np.int64)]
        out = np.asarray(probs, np.float32).copy()
        kept = slots >= 0
        had = np.zeros(len(slots), bool)
        had[kept] = self._has_probs[slots[kept]]
        a = np.float32(self.config.alpha)
        out[had] = a * out[had] + (1 - a) * self._probs[slots[had]]
        self._probs[slots[kept]] = out[kept]
        self._has_probs[slots[kept]] = True
        return out

    def confirm(self, above: np.ndarray, timestamp: float, hold_s: float) -> np.ndarray:
        """Which of this frame's pairs have had their gate open for at least ``hold_s`` seconds.

        Args:
            above: (M,) bool, the gate of the pairs of the last :meth:`smooth_interact` call.
            timestamp: this frame's time in seconds (non-decreasing; the pipeline passes seconds since the
                stream's first frame).
            hold_s: seconds the gate must have stayed open without a break (0: every open gate), compared
                with a slack of :data:`HOLD_TOLERANCE_S`.

        Returns:
            (M,) bool. A pair whose gate closes, or that leaves the frame for longer than ``grace_frames``,
            starts again from zero.
        """
        above = np.asarray(above, bool)
        slots = self._slot
        kept = slots >= 0
        prev = np.full(len(above), np.nan)
        prev[kept] = self._since[slots[kept]]
        start = np.where(above, np.where(np.isnan(prev), timestamp, prev), np.nan)
        self._since[slots[kept]] = start[kept]
        with np.errstate(invalid="ignore"):
            return above & (timestamp - start >= hold_s - HOLD_TOLERANCE_S)

    def _lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(self._keys) == 0:
            return np.zeros(len(keys), bool), np.zeros(len(keys), np.int64)
        idx = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return self._keys[idx] == keys, idx

    def _merge(self, keys: np.ndarray, found: np.ndarray, idx: np.ndarray, p: np.ndarray) -> None:
        """New state = this frame's pairs + old pairs still within their grace period, capped."""
        cfg = self.config
        carry = self._frame - self._seen <= cfg.grace_frames
        carry[idx[found]] = False  # replaced by this frame's values
        probs_new = np.zeros((len(keys), self.num_classes), np.float32)
        has_new = np.zeros(len(keys), bool)
        probs_new[found] = self._probs[idx[found]]
        has_new[found] = self._has_probs[idx[found]]
        since_new = np.full(len(keys), np.nan)
        since_new[found] = self._since[idx[found]]
        all_keys = np.concatenate([keys, self._keys[carry]])
        if not carry.any() and (len(keys) < 2 or bool((keys[1:] > keys[:-1]).all())):
            order = np.arange(len(keys))  # the usual case: this frame's pairs only, already sorted
        else:
            order = np.argsort(all_keys, kind="stable")
        if len(order) > cfg.max_pairs:  # keep this frame's pairs first, then the most recently seen
            seen = np.concatenate([np.full(len(keys), self._frame), self._seen[carry]])
            keep = np.argsort(-seen, kind="stable")[: cfg.max_pairs]
            order = keep[np.argsort(all_keys[keep], kind="stable")]
        self._keys = all_keys[order]
        self._p = np.concatenate([p, self._p[carry]])[order]
        self._probs = np.concatenate([probs_new, self._probs[carry]])[order]
        self._has_probs = np.concatenate([has_new, self._has_probs[carry]])[order]
        self._since = np.concatenate([since_new, self._since[carry]])[order]
        self._seen = np.concatenate([np.full(len(keys), self._frame), self._seen[carry]])[order]
        slot_of = np.full(len(all_keys), -1, np.int64)
        slot_of[order] = np.arange(len(order))
        self._slot = slot_of[: len(keys)]  # -1 only when max_pairs < this frame's pair count
