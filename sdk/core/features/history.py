"""Short, bounded per-track history for the ``pairedge`` spec (vectorised over tracks, no per-pair work).

Each track owns one *slot*: the last ``K`` observations (box centre, box height, timestamp), newest last.
Stored positions are always expressed in the **current** image's coordinates: when the camera moves, the
extractor passes the estimated ego-motion (a 2 x 3 map from previous-frame to current-frame coordinates of
static points) to :meth:`TrackHistory.warp`, which moves every stored sample, so a displacement read from
the history is motion relative to the static scene. A track unseen for more than ``evict_after`` frames
loses its slot; slots are reused, so memory is bounded by the number of simultaneously live tracks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.core.features import compiled

DIV_EPS = 1e-6


@dataclass(frozen=True)
class TrackMotion:
    """History-derived motion of the tracks of one frame (rows follow the ids given to ``observe``).

    Attributes:
        velocity: (N, 2) float64 centre velocity over the window, body heights per second.
        step_velocity: (N, 2) float64 velocity over the last step, body heights per second.
        unsteadiness: (N,) float64 std of the per-step velocities in the window, heights per second.
        scale_rate: (N,) float64 ``d ln(h) / dt`` over the window, 1/s (positive = growing, coming closer).
        fill: (N,) float64 ``(samples - 1) / (K - 1)`` in [0, 1]: how much history exists.
    """

    velocity: np.ndarray
    step_velocity: np.ndarray
    unsteadiness: np.ndarray
    scale_rate: np.ndarray
    fill: np.ndarray


def wrap_delta(dx: np.ndarray, width: float | None) -> np.ndarray:
    """Horizontal differences wrapped into ``[-W/2, W/2)`` for 360-degree panoramas (``width`` None: as
    is)."""
    if width is None:
        return dx
    return (dx + width / 2) % width - width / 2


class TrackHistory:
    """Ring buffers of the last ``length`` observations of every live track.

    Args:
        length: K >= 2, samples kept per track.
        evict_after: frames a track may be unseen before its slot is freed.
    """

    def __init__(self, length: int, evict_after: int, capacity: int = 16) -> None:
        if length < 2:
            raise ValueError(f"history length must be >= 2, got {length}")
        self.length = length
        self.evict_after = evict_after
        self._alloc(max(capacity, 1))

    def _alloc(self, cap: int) -> None:
        k = self.length
        self.ids = np.full(cap, -1, np.int64)  # track id of each slot, -1 = free
        self.pos = np.zeros((cap, k, 2))  # centre x, y in current-frame pixels
        self.height = np.ones((cap, k))
        self.time = np.zeros((cap, k))
        self.count = np.zeros(cap, np.int64)  # valid samples (newest at index K-1)
        self.last_seen = np.zeros(cap, np.int64)

    def reset(self) -> None:
        """Forget every track."""
        self._alloc(len(self.ids))

    @property
    def live(self) -> int:
        """Number of occupied slots."""
        return int((self.ids >= 0).sum())

    def _grow(self, need: int) -> None:
        old = (self.ids, self.pos, self.height, self.time, self.count, self.last_seen)
        cap = len(self.ids)
        self._alloc(max(2 * cap, cap + need))
        for new, prev in zip(
            (self.ids, self.pos, self.height, self.time, self.count, self.last_seen), old, strict=True
        ):
            new[:cap] = prev

    def slots_of(self, ids: np.ndarray) -> np.ndarray:
        """Slots of ``ids`` (-1 where the track has none). (N,) int64 -> (N,) int64."""
        ids = np.asarray(ids, dtype=np.int64)
        occupied = np.flatnonzero(self.ids >= 0)
        if len(occupied) == 0:
            return np.full(len(ids), -1, np.int64)
        order = occupied[np.argsort(self.ids[occupied], kind="stable")]
        sorted_ids = self.ids[order]
        pos = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
        return np.where(sorted_ids[pos] == ids, order[pos], -1).astype(np.int64)

    def warp(self, ego: np.ndarray) -> None:
        """Move every stored sample by the camera's ego-motion.

        Args:
            ego: (2, 3) map from previous-frame to current-frame pixel coordinates of static points.
        """
        live = self.ids >= 0
        if not live.any():
            return
        a, b = ego[:, :2], ego[:, 2]
        self.pos[live] = self.pos[live] @ a.T + b
        self.height[live] *= np.sqrt(abs(np.linalg.det(a)))

    def observe(
        self, ids: np.ndarray, centres: np.ndarray, heights: np.ndarray, timestamp: float, frame: int
    ) -> np.ndarray:
        """Append one observation per track (ids unique); returns their (N,) slots."""
        slots = self.slots_of(ids)
        new = slots < 0
        if new.any():
            free = np.flatnonzero(self.ids < 0)
            if len(free) < new.sum():
                self._grow(int(new.sum()) - len(free))
                free = np.flatnonzero(self.ids < 0)
            fresh = free[: int(new.sum())]
            slots[new] = fresh
            self.ids[fresh] = ids[new]
            self.count[fresh] = 0
        self.pos[slots, :-1] = self.pos[slots, 1:]
        self.height[slots, :-1] = self.height[slots, 1:]
        self.time[slots, :-1] = self.time[slots, 1:]
        self.pos[slots, -1] = centres
        self.height[slots, -1] = heights
        self.time[slots, -1] = timestamp
        self.count[slots] = np.minimum(self.count[slots] + 1, self.length)
        self.last_seen[slots] = frame
        return slots

    def evict(self, frame: int) -> None:
        """Free the slots of tracks unseen for more than ``evict_after`` frames."""
        gone = (self.ids >= 0) & (frame - self.last_seen > self.evict_after)
        self.ids[gone] = -1
        self.count[gone] = 0

    def motion(self, slots: np.ndarray, wrap_width: float | None = None) -> TrackMotion:
        """History-derived motion of the given slots (see :class:`TrackMotion`): by the compiled extension
        where it is built (not for panoramas), else :meth:`motion_numpy`; the two agree to float64
        rounding."""
        kernel = compiled.KERNEL
        if kernel is None or wrap_width is not None:
            return self.motion_numpy(slots, wrap_width)
        slots = np.ascontiguousarray(slots, np.int64)
        out = np.empty((len(slots), 7))
        kernel.track_motion(
            self.pos, self.height, self.time, self.count, slots, out, self.length, len(self.ids), len(slots)
        )
        return TrackMotion(out[:, 0:2], out[:, 2:4], out[:, 4], out[:, 5], out[:, 6])

    def motion_numpy(self, slots: np.ndarray, wrap_width: float | None = None) -> TrackMotion:
        """:meth:`motion` by numpy: the definition."""
        k = self.length
        n = len(slots)
        pos, hgt, tim = self.pos[slots], self.height[slots], self.time[slots]
        cnt = self.count[slots]
        oldest = k - cnt  # index of the oldest valid sample
        rows = np.arange(n)
        mean_h = np.maximum((hgt[rows, oldest] + hgt[:, -1]) / 2, DIV_EPS)
        span = tim[:, -1] - tim[rows, oldest]
        ok = (cnt >= 2) & (span > 0)
        disp = pos[:, -1] - pos[rows, oldest]
        disp[:, 0] = wrap_delta(disp[:, 0], wrap_width)
        velocity = np.where(ok[:, None], disp / np.maximum(span, DIV_EPS)[:, None] / mean_h[:, None], 0.0)
        ratio = hgt[:, -1] / np.maximum(hgt[rows, oldest], DIV_EPS)
        scale_rate = np.where(ok, np.log(np.maximum(ratio, DIV_EPS)) / np.maximum(span, DIV_EPS), 0.0)
        # per-step velocities: step j goes from sample j to j + 1 and is valid when sample j is valid
        steps = np.diff(pos, axis=1)
        steps[:, :, 0] = wrap_delta(steps[:, :, 0], wrap_width)
        dts = np.diff(tim, axis=1)
        valid = (np.arange(k - 1)[None, :] >= oldest[:, None]) & (dts > 0)
        step_v = (
            np.where(valid[..., None], steps / np.maximum(dts, DIV_EPS)[..., None], 0.0)
            / mean_h[:, None, None]
        )
        nv = valid.sum(axis=1)
        mean_v = step_v.sum(axis=1) / np.maximum(nv, 1)[:, None]
        dev = np.where(valid[..., None], step_v - mean_v[:, None, :], 0.0)
        unsteady = np.sqrt((dev**2).sum(axis=(1, 2)) / np.maximum(nv, 1))
        last = np.where(valid[:, -1:], step_v[:, -1], 0.0)
        fill = np.maximum(cnt - 1, 0) / (k - 1)
        return TrackMotion(
            velocity, last, np.where(nv >= 2, unsteady, 0.0), scale_rate, fill.astype(np.float64)
        )
