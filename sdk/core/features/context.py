"""Long-horizon and group context of the ``pairedge`` spec, version 3 (box geometry only, causal, streaming).

The version-2 pair block sees a short track history (a few tenths of a second to a second). Some relations
need more: approaching / leaving show in how the distance changed over *seconds*, and a queue (several
people on a line, a pair anywhere along it) is a property of the group. Version 3 appends
:data:`CONTEXT_NAMES` to the pair block, computed here from each frame and earlier frames only. Distances are
between the boxes' bottom centres (the ground contact point) in mean body heights (box heights), so the
values do not depend on the image size; all are symmetric in A and B.

* ``dist_change_{L}s`` (L in :data:`LAGS_S` seconds): ``(d(t) - d(t - L)) / L`` in heights per second, 0 when
  either person was not seen at ``t - L``; ``lag_{L}s_known`` the mask;
* ``comp_speed_mean``, ``comp_speed_min``, ``comp_cosine``: each person's displacement over
  :data:`MOTION_S` seconds per current height, minus the median displacement of everyone seen both then and
  now (a hand-held or moving camera moves everyone), per second: the mean / smaller speed of the two and the
  cosine of their directions (0 unless both move faster than :data:`STILL`);
* ``group_size``, ``group_linearity``, ``axis_alignment``, ``between_fraction``, ``same_group``: the people
  chained to each other within :data:`CHAIN` heights form groups; for a pair in the same group, its size
  (/ 10), how line-like it is (``1 - l2 / l1`` of its bottom centres' scatter), ``|cos|`` of AB with the
  group's main axis, and the share of the other members lying between A and B along that axis; all 0 when
  A and B are in different groups.

"Seen at ``t - L``" means a stored observation within half the current frame interval of ``t - L``: at a
constant frame rate, exactly the frame ``L * fps`` frames earlier. Memory and work per frame are bounded:
:class:`ContextHistory` keeps at most ``capacity`` observations per track (at frame rates above
``capacity / 4`` fps the 4-s lag is unknown) and at most ``max_tracks`` tracks besides the current frame's
people (the least recently seen go first); tracks unseen for longer than the longest lag (+ 1 s) are
dropped, and a timestamp that goes backwards starts the history afresh.
:mod:`pairedge.export.datasets.cad_context` computes the same values offline from whole CAD sequences (the
reference the tests compare against).
"""

from __future__ import annotations

import numpy as np
from pairedge.core.features.history import wrap_delta

#: Look-back horizons (seconds) of the distance change.
LAGS_S: tuple[float, ...] = (1.0, 2.0, 4.0)
#: Horizon (seconds) of the camera-compensated displacement.
MOTION_S = 1.0
#: Two people within this many mean box heights (bottom centres) are chained into one group.
CHAIN = 1.6
#: Speed (heights per second) below which a displacement has no direction.
STILL = 0.1
EPS = 1e-6

CONTEXT_NAMES: tuple[str, ...] = (
    *(f"dist_change_{int(s)}s" for s in LAGS_S),
    *(f"lag_{int(s)}s_known" for s in LAGS_S),
    "comp_speed_mean",
    "comp_speed_min",
    "comp_cosine",
    "group_size",
    "group_linearity",
    "axis_alignment",
    "between_fraction",
    "same_group",
)


def feet(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(..., 2) bottom centres and (...,) heights of ``x y w h`` boxes (..., 4)."""
    return np.stack([boxes[..., 0] + boxes[..., 2] / 2, boxes[..., 1] + boxes[..., 3]], -1), boxes[..., 3]


def chain_groups(points: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """(n,) component id of each person (the smallest index in its component): people chained within
    ``CHAIN`` mean heights of each other. Vectorised label propagation with pointer jumping (O(n^2) per
    round, a few rounds)."""
    n = len(points)
    label = np.arange(n)
    if n < 2:
        return label
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    near = d < CHAIN * (heights[:, None] + heights[None]) / 2
    np.fill_diagonal(near, True)
    while True:
        new = np.where(near, label[None, :], n).min(axis=1)
        new = new[new]  # jump: a neighbour's label is in the same component and no larger
        if np.array_equal(new, label):
            return label
        label = new


def group_values(points: np.ndarray, heights: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """(M, 5) group values (the last 5 :data:`CONTEXT_NAMES`) of the pairs ``(ia, ib)``, indices into the n
    people of ``points`` (n, 2) / ``heights`` (n,)."""
    comp = chain_groups(points, heights)
    out = np.zeros((len(ia), 5))
    same = np.flatnonzero(comp[ia] == comp[ib])
    if not len(same):
        return out
    same = same[np.argsort(comp[ia[same]], kind="stable")]  # the pairs of each group, one run per group
    for rows in np.split(same, np.flatnonzero(np.diff(comp[ia[same]])) + 1):
        members = np.flatnonzero(comp == comp[ia[rows[0]]])
        p = points[members] / max(float(np.mean(heights[members])), EPS)
        centred = p - p.mean(0)
        evals, evecs = np.linalg.eigh(centred.T @ centred / len(p))
        axis = evecs[:, 1]
        linear = 1.0 - evals[0] / max(evals[1], EPS)
        proj = points @ axis
        pa, pb = proj[ia[rows]], proj[ib[rows]]
        ab = points[ib[rows]] - points[ia[rows]]
        align = np.abs(ab @ axis) / np.maximum(np.linalg.norm(ab, axis=1), EPS)
        lo, hi = np.minimum(pa, pb), np.maximum(pa, pb)
        mp = np.sort(proj[members])  # members strictly between lo and hi, by two binary searches
        # (#p < hi) - (#p <= lo); when lo == hi that is -(#p == lo): nobody is strictly between
        between = np.maximum(np.searchsorted(mp, hi, side="left") - np.searchsorted(mp, lo, side="right"), 0)
        others = max(len(members) - 2, 1)
        out[rows] = np.stack(
            [
                np.full(len(rows), len(members) / 10.0),
                np.full(len(rows), linear),
                align,
                between / others,
                np.ones(len(rows)),
            ],
            1,
        )
    return out


class ContextHistory:
    """Per-stream observations (timestamp, bottom centre, height) of every track over the last
    ``max(LAGS_S, MOTION_S)`` seconds, and the context values of a frame's pairs.

    Args:
        capacity: observations kept per track (a ring; the oldest is overwritten).
        max_tracks: tracks kept at once (beyond it the least recently seen is dropped).
    """

    def __init__(self, capacity: int = 256, max_tracks: int = 1024) -> None:
        if capacity < 2 or max_tracks < 1:
            raise ValueError(f"expected capacity >= 2 and max_tracks >= 1, got {capacity}, {max_tracks}")
        self.capacity = capacity
        self.max_tracks = max_tracks
        self.horizon = max(*LAGS_S, MOTION_S)
        self.reset()

    def reset(self) -> None:
        """Forget every track."""
        self._slot: dict[int, int] = {}
        self._free: list[int] = []
        self._t = np.full((0, self.capacity), np.nan)
        self._xyh = np.zeros((0, self.capacity, 3))
        self._head = np.zeros(0, np.int64)
        self._seen = np.zeros(0)
        self._last_t: float | None = None

    def __len__(self) -> int:
        return len(self._slot)

    def _grow(self) -> None:
        n = len(self._t)
        extra = max(n, 1)
        self._t = np.concatenate([self._t, np.full((extra, self.capacity), np.nan)])
        self._xyh = np.concatenate([self._xyh, np.zeros((extra, self.capacity, 3))])
        self._head = np.concatenate([self._head, np.zeros(extra, np.int64)])
        self._seen = np.concatenate([self._seen, np.full(extra, -np.inf)])
        self._free.extend(range(n + extra - 1, n - 1, -1))

    def _drop(self, track_id: int) -> None:
        s = self._slot.pop(track_id)
        self._t[s] = np.nan
        self._head[s] = 0
        self._seen[s] = -np.inf
        self._free.append(s)

    def _slots_for(self, ids: np.ndarray, timestamp: float) -> np.ndarray:
        """Slots of ``ids``. A new id takes a free slot; when none is free and ``max_tracks`` are stored, the
        least recently seen track not in this frame makes room; otherwise the store grows (a frame's own
        people always get a slot)."""
        current = set(ids.tolist())
        for tid in [t for t in self._slot if t not in current]:
            if self._seen[self._slot[tid]] < timestamp - self.horizon - 1.0:
                self._drop(tid)  # unseen for longer than any lag looks back
        old: list[int] | None = None  # stored tracks not in this frame, most recently seen first
        out = np.empty(len(ids), np.int64)
        for k, tid in enumerate(ids.tolist()):
            s = self._slot.get(tid)
            if s is None:
                if not self._free:
                    if old is None:
                        old = sorted(
                            (t for t in self._slot if t not in current),
                            key=lambda t: -self._seen[self._slot[t]],
                        )
                    if len(self._slot) >= self.max_tracks and old:
                        self._drop(old.pop())
                    else:
                        self._grow()
                s = self._free.pop()
                self._slot[tid] = s
            out[k] = s
        return out

    def _lookup(self, slots: np.ndarray, when: float, tol: float) -> tuple[np.ndarray, np.ndarray]:
        """(N, 3) stored ``x y h`` of each slot at time ``when`` (+- ``tol``) and (N,) bool found."""
        if not len(slots):
            return np.zeros((0, 3)), np.zeros(0, bool)
        t = self._t[slots]
        gap = np.abs(np.where(np.isnan(t), np.inf, t - when))
        k = np.argmin(gap, axis=1)
        rows = np.arange(len(slots))
        return self._xyh[slots, k], gap[rows, k] <= tol

    def step(
        self,
        ids: np.ndarray,
        boxes: np.ndarray,
        timestamp: float,
        dt: float,
        ia: np.ndarray,
        ib: np.ndarray,
        wrap_width: float | None = None,
    ) -> np.ndarray:
        """Record this frame's people and return the context of its pairs.

        Args:
            ids: (N,) unique track ids of the frame's people. boxes: (N, 4) ``x y w h`` (finite, h > 0).
            timestamp: seconds. dt: seconds since the previous frame (sets the lookup tolerance dt / 2).
            ia, ib: (M,) row indices into ``ids`` of the pairs.
            wrap_width: 360-degree panorama width (horizontal differences wrap), None for a flat image.

        Returns:
            (M, len(CONTEXT_NAMES)) float64, unclamped.
        """
        if self._last_t is not None and timestamp < self._last_t:
            self.reset()  # time went backwards: a new stream
        self._last_t = timestamp
        ids = np.asarray(ids, np.int64).reshape(-1)
        b = np.asarray(boxes, np.float64).reshape(-1, 4)
        foot, height = feet(b)
        xyh = np.column_stack([foot, height])  # what is stored per observation
        slots = self._slots_for(ids, timestamp)
        tol = max(dt, EPS) / 2
        out = np.zeros((len(ia), len(CONTEXT_NAMES)))
        nl = len(LAGS_S)

        def gap(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """x and y differences (M,) of point arrays (M, 2+), x wrapped on panoramas."""
            return wrap_delta(p[:, 0] - q[:, 0], wrap_width), p[:, 1] - q[:, 1]

        def pair_distance(xyh: np.ndarray) -> np.ndarray:
            """(M,) distance of each pair in mean heights, from per-person ``x y h`` (N, 3)."""
            a, b_ = np.take(xyh, ia, axis=0), np.take(xyh, ib, axis=0)
            return np.hypot(*gap(a, b_)) / np.maximum((a[:, 2] + b_[:, 2]) / 2, EPS)

        if len(ia):
            d_now = pair_distance(xyh)
            for k, lag in enumerate(LAGS_S):
                then, found = self._lookup(slots, timestamp - lag, tol)
                known = np.take(found, ia) & np.take(found, ib)
                out[:, k] = np.where(known, (d_now - pair_distance(then)) / lag, 0.0)
                out[:, nl + k] = known
            then, found = self._lookup(slots, timestamp - MOTION_S, tol)
            disp = np.zeros((len(ids), 2))
            if found.any():
                disp = np.column_stack(gap(foot, then)) / np.maximum(height, EPS)[:, None] / MOTION_S
                disp = disp - np.median(disp[found], axis=0)
                disp[~found] = 0.0
            da, db = np.take(disp, ia, axis=0), np.take(disp, ib, axis=0)
            sa, sb = np.hypot(da[:, 0], da[:, 1]), np.hypot(db[:, 0], db[:, 1])
            moving = (sa > STILL) & (sb > STILL)
            cos = (da[:, 0] * db[:, 0] + da[:, 1] * db[:, 1]) / np.maximum(sa * sb, EPS)
            out[:, 2 * nl] = (sa + sb) / 2
            out[:, 2 * nl + 1] = np.minimum(sa, sb)
            out[:, 2 * nl + 2] = np.where(moving, cos, 0.0)
            out[:, 2 * nl + 3 :] = group_values(foot, height, ia, ib)
        # record after the lookups (a lag never matches the current frame anyway)
        head = self._head[slots]
        self._t[slots, head] = timestamp
        self._xyh[slots, head] = xyh
        self._head[slots] = (head + 1) % self.capacity
        self._seen[slots] = timestamp
        return out
