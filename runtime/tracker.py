"""A small built-in tracker that gives ids to detections without identities.

Method (SORT-like, numpy only): every track keeps its last box and a constant-velocity estimate of its
centre (pixels per second, smoothed). For a new frame each track's box is predicted forward to the frame's
timestamp; candidate matches are track/detection pairs whose IoU with the prediction is at least
``min_iou``, whose centre moved at most ``max_center_jump`` box heights (the gate widens with every frame the
track went unseen) and whose height changed by at most ``max_scale_change``; candidates are then assigned
greedily by decreasing IoU; with ``rescue_suppressed``, tracks still unmatched may then take a box duplicate
suppression removed (two overlapping people). Unmatched detections with ``score >= min_score`` start new
tracks; a track unseen for more than ``max_age`` frames ends. State lives in fixed arrays of ``max_tracks``
rows, so memory is bounded; when they are full the longest-unseen track is evicted first.

Coasting (``coast_frames > 0``): a detector misses people now and then (small, occluded or blurred people),
and every miss would cut that person's pairs for a frame and restart their link confirmation.
:meth:`IoUTracker.coasting` gives the tracks that were matched at least ``coast_min_hits`` times and have
been unseen for at most ``coast_frames`` frames, with their constant-velocity predicted boxes, so the
pipeline can keep those people (marked ``coasted``) through short gaps.

Limits (the ``bytetrack``, ``ocsort`` and ``botsort`` backends of :mod:`pairedge.runtime.tracker_backends`
run real trackers when they matter): greedy assignment, not
optimal (Hungarian); no appearance model, so people who cross while fully overlapping can swap ids and a
person who reappears after ``max_age`` frames gets a new id; a constant-velocity model only (no camera
motion compensation: on a fast-turning robot use ``botsort``, or lower ``min_iou`` / raise ``max_center_jump``); no
confirmation period, so a single false detection gets an id for one frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.core.boxes import iou_matrix, nms_keep
from pairedge.core.errors import InputError
from pairedge.core.types import Detections


@dataclass(frozen=True)
class TrackerConfig:
    """Options of :class:`IoUTracker` (all thresholds inclusive).

    Attributes:
        min_iou: minimum IoU of a detection with a track's predicted box.
        max_center_jump: maximum centre displacement from the prediction, in track box heights, for a track
            seen in the previous frame; multiplied by ``1 + frames unseen`` afterwards.
        max_scale_change: maximum ratio between detection and track box heights.
        max_age: frames a track survives without a detection.
        max_tracks: capacity of the state arrays (bounded memory).
        min_score: detections below this score do not start tracks (they may still continue one).
        velocity_smoothing: weight of the newest velocity measurement in (0, 1].
        nms_iou: detections overlapping a higher-scored detection of the same frame by more than this IoU
            are duplicates (detectors without non-maximum suppression emit them) and get id -1; None keeps
            every detection. 0.35 is the safe side for raw detectors (a detector's surviving duplicates sit
            just under its own suppression: PETS's ACF at IoU 0.35-0.5); with a detector that emits no
            duplicates, 0.5 or None keeps overlapping group members (docs/runtime.md).
        coast_frames: a track unseen for at most this many frames is reported by :meth:`IoUTracker.coasting`
            with its predicted box (0: never; must not exceed ``max_age``). This default (3) and
            ``SmoothingConfig.grace_frames`` are chosen together on simulator validation scenes
            (``benchmarks/bench_tracker.py``).
        coast_min_hits: only tracks matched at least this many times coast (a one-frame false detection
            does not).
        rescue_suppressed: after the association, a track left without a detection may take a box that
            ``nms_iou`` suppressed (same gates), so two overlapping people keep both their tracks. Off by
            default: it helps where the detector emits no duplicates (simulator, held out: link F1 +0.04 to
            +0.11), but a duplicate that once started a track of its own then keeps it alive next to the
            person, a false pair (PETS's raw ACF detections: link precision 0.79 -> 0.62); see
            docs/runtime.md.
    """

    min_iou: float = 0.2
    max_center_jump: float = 0.75
    max_scale_change: float = 1.5
    max_age: int = 15
    max_tracks: int = 512
    min_score: float = 0.0
    velocity_smoothing: float = 0.5
    nms_iou: float | None = 0.35
    coast_frames: int = 3
    rescue_suppressed: bool = False
    coast_min_hits: int = 3

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_iou <= 1.0 or self.max_center_jump <= 0 or self.max_scale_change < 1.0:
            raise InputError(f"tracker config: thresholds out of range in {self}")
        if self.max_age < 0 or self.max_tracks < 1 or not 0.0 < self.velocity_smoothing <= 1.0:
            raise InputError(
                f"tracker config: max_age >= 0, max_tracks >= 1, velocity_smoothing in (0, 1]; got {self}"
            )
        nms = self.nms_iou
        if nms is not None and (isinstance(nms, bool) or not isinstance(nms, (int, float)) or not 0.0 < nms <= 1.0):
            raise InputError(f"tracker config: nms_iou must be an IoU in (0, 1] or None (no suppression), got {nms!r}")
        if not 0 <= self.coast_frames <= self.max_age or self.coast_min_hits < 1:
            raise InputError(
                f"tracker config: expected 0 <= coast_frames <= max_age and coast_min_hits >= 1; got {self}"
            )


def greedy_assign(score: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy one-to-one assignment by decreasing ``score`` among ``valid`` (T, N) entries.

    Returns:
        rows, cols: (K,) int64 matched index pairs.
    """
    t_idx, d_idx = np.nonzero(valid)
    order = np.argsort(-score[t_idx, d_idx], kind="stable")
    used_t = np.zeros(score.shape[0], bool)
    used_d = np.zeros(score.shape[1], bool)
    rows: list[int] = []
    cols: list[int] = []
    for t, d in zip(t_idx[order].tolist(), d_idx[order].tolist(), strict=True):  # ~N candidates after gating
        if not used_t[t] and not used_d[d]:
            used_t[t] = used_d[d] = True
            rows.append(t)
            cols.append(d)
    return np.asarray(rows, np.int64), np.asarray(cols, np.int64)


class IoUTracker:
    """Assigns track ids to per-frame detections (see the module docstring for the method and its limits).

    Args:
        config: :class:`TrackerConfig`; None for the defaults.
    """

    def __init__(self, config: TrackerConfig | None = None) -> None:
        self.config = config or TrackerConfig()
        k = self.config.max_tracks
        self._box = np.zeros((k, 4), np.float64)  # last matched box, x y w h
        self._vel = np.zeros((k, 2), np.float64)  # centre velocity, px / s
        self._time = np.zeros(k, np.float64)  # timestamp of the last match
        self._misses = np.zeros(k, np.int64)  # frames unseen
        self._hits = np.zeros(k, np.int64)  # detections matched (the birth counts)
        self._ids = np.full(k, -1, np.int64)
        self._alive = np.zeros(k, bool)
        self._next_id = 1

    @property
    def num_tracks(self) -> int:
        """Tracks currently alive (seen within ``max_age`` frames)."""
        return int(self._alive.sum())

    def reset(self) -> None:
        """Forget every track (ids keep increasing)."""
        self._alive[:] = False

    def predicted_boxes(self, slots: np.ndarray, timestamp: float) -> np.ndarray:
        """(len(slots), 4) boxes of the given tracks moved with their velocity to ``timestamp``."""
        dt = np.clip(timestamp - self._time[slots], 0.0, None)[:, None]
        pred = self._box[slots].copy()
        pred[:, :2] += self._vel[slots] * dt
        return pred

    def coasting(self, timestamp: float, present: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The tracks to keep through a short detection gap, after :meth:`step` of the frame at ``timestamp``.

        Args:
            timestamp: the frame's time, seconds.
            present: (N, 4) the frame's kept detections, ``x y w h``: a prediction overlapping one of them by
                IoU above ``nms_iou`` (its default 0.35 when None) is left out; it would be a second box on one person
                (e.g. a track that lost its detection to a neighbour's track).

        Returns:
            ids: (K,) int64 ids of the live tracks unseen for 1 to ``coast_frames`` frames that were matched at
            least ``coast_min_hits`` times (K = 0 when ``coast_frames`` is 0).
            boxes: (K, 4) float64 their boxes predicted to ``timestamp``, ``x y w h`` (not clipped).
        """
        cfg = self.config
        slots = np.flatnonzero(
            self._alive
            & (self._misses >= 1)
            & (self._misses <= cfg.coast_frames)
            & (self._hits >= cfg.coast_min_hits)
        )
        boxes = self.predicted_boxes(slots, timestamp)
        if present is not None and len(present) and len(slots):
            limit = TrackerConfig.nms_iou if cfg.nms_iou is None else cfg.nms_iou  # the default when off
            free = iou_matrix(boxes, np.asarray(present, np.float64).reshape(-1, 4)).max(axis=1) <= limit
            slots, boxes = slots[free], boxes[free]
        return self._ids[slots].copy(), boxes

    def step(
        self, boxes: np.ndarray, timestamp: float, scores: np.ndarray | None = None, frame: np.ndarray | None = None
    ) -> np.ndarray:
        """Track one frame.

        Args:
            boxes: (N, 4) float ``x y w h`` pixels, finite with positive size (validated upstream).
            timestamp: seconds, non-decreasing.
            scores: (N,) detector scores, or None (all 1).
            frame: the image; unused (no camera-motion compensation here: the ``botsort`` backend of
                :mod:`pairedge.runtime.tracker_backends` has it).

        Returns:
            (N,) int64 track ids; -1 for a detection that matched no track and did not start one.
        """
        cfg = self.config
        det = np.asarray(boxes, np.float64).reshape(-1, 4)
        sc = np.ones(len(det)) if scores is None else np.asarray(scores, np.float64).reshape(-1)
        ids = np.full(len(det), -1, np.int64)
        rows = np.arange(len(det)) if cfg.nms_iou is None else np.flatnonzero(nms_keep(det, sc, cfg.nms_iou))
        slots = np.flatnonzero(self._alive)
        matched, cols = self._associate(slots, det, rows, timestamp)
        if cfg.rescue_suppressed and len(rows) < len(det):
            # a box NMS suppressed may be a second, overlapping person: a track left without a detection may
            # take it (same gates). A duplicate of one person stays out unless it once got a track of its own
            left = np.setdiff1d(slots, matched, assume_unique=True)
            more, more_cols = self._associate(left, det, np.setdiff1d(np.arange(len(det)), rows), timestamp)
            matched, cols = np.concatenate([matched, more]), np.concatenate([cols, more_cols])
        self._update(matched, det[cols], timestamp)
        ids[cols] = self._ids[matched]
        unseen = np.setdiff1d(slots, matched, assume_unique=True)
        self._misses[unseen] += 1
        self._alive[unseen[self._misses[unseen] > cfg.max_age]] = False
        new = np.setdiff1d(rows, cols, assume_unique=True)
        new = new[sc[new] >= cfg.min_score]
        ids[new] = self._birth(det[new], timestamp)
        return ids

    def _associate(
        self, slots: np.ndarray, det: np.ndarray, rows: np.ndarray, timestamp: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Match tracks ``slots`` with detections ``det[rows]``; returns (matched slots, detection rows)."""
        r, c = self._match(slots, det[rows], timestamp)
        return slots[r], rows[c]

    def _match(self, slots: np.ndarray, det: np.ndarray, timestamp: float) -> tuple[np.ndarray, np.ndarray]:
        cfg = self.config
        if len(slots) == 0 or len(det) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        pred = self.predicted_boxes(slots, timestamp)
        iou = iou_matrix(pred, det)
        pc = pred[:, :2] + pred[:, 2:] / 2
        dc = det[:, :2] + det[:, 2:] / 2
        jump = np.hypot(pc[:, 0:1] - dc[:, 0], pc[:, 1:2] - dc[:, 1])
        reach = cfg.max_center_jump * pred[:, 3:4] * (1 + self._misses[slots, None])
        ratio = det[:, 3] / np.maximum(pred[:, 3:4], 1e-9)
        valid = (
            (iou >= cfg.min_iou)
            & (jump <= reach)
            & (ratio <= cfg.max_scale_change)
            & (ratio >= 1.0 / cfg.max_scale_change)
        )
        return greedy_assign(iou, valid)

    def _update(self, slots: np.ndarray, det: np.ndarray, timestamp: float) -> None:
        if len(slots) == 0:
            return
        dt = timestamp - self._time[slots]
        old_c = self._box[slots, :2] + self._box[slots, 2:] / 2
        new_c = det[:, :2] + det[:, 2:] / 2
        ok = dt > 1e-9
        measured = np.where(ok[:, None], (new_c - old_c) / np.where(ok, dt, 1.0)[:, None], self._vel[slots])
        a = self.config.velocity_smoothing
        self._vel[slots] = a * measured + (1 - a) * self._vel[slots]
        self._box[slots] = det
        self._time[slots] = timestamp
        self._misses[slots] = 0
        self._hits[slots] += 1

    def _birth(self, det: np.ndarray, timestamp: float) -> np.ndarray:
        n = len(det)
        if n == 0:
            return np.zeros(0, np.int64)
        free = np.flatnonzero(~self._alive)
        if len(free) < n:  # full: evict the longest-unseen live tracks
            live = np.flatnonzero(self._alive)
            order = live[np.argsort(-self._misses[live], kind="stable")]
            self._alive[order[: n - len(free)]] = False
            free = np.flatnonzero(~self._alive)
        slots = free[:n]
        new_ids = np.arange(self._next_id, self._next_id + len(slots), dtype=np.int64)
        self._next_id += len(slots)
        self._box[slots] = det[: len(slots)]
        self._vel[slots] = 0.0
        self._time[slots] = timestamp
        self._misses[slots] = 0
        self._hits[slots] = 1
        self._ids[slots] = new_ids
        self._alive[slots] = True
        out = np.full(n, -1, np.int64)
        out[: len(slots)] = new_ids
        return out


def with_coasted(
    tracker: IoUTracker,
    dets: Detections,
    timestamp: float,
    size: tuple[int, int] | None,
    max_people: int | None,
) -> tuple[Detections, np.ndarray]:
    """The frame's tracked detections with the tracker's coasting people appended (after :meth:`IoUTracker.step`).

    Predicted boxes are clipped to the image ``size`` ``(W, H)`` (None: not clipped); one less than half inside
    it (a person walking out) is left out; at most ``max_people`` people in all (None: no cap). Coasted people
    get score 0 and, when the detections carry orientations, an unknown one (NaN, confidence 0).

    Returns:
        The detections (N rows, the given ones first) and an (N,) bool mask of the coasted rows.
    """
    ids, boxes = tracker.coasting(timestamp, dets.boxes)
    if size is not None and len(ids):
        x0, x1 = np.clip(boxes[:, 0], 0, size[0]), np.clip(boxes[:, 0] + boxes[:, 2], 0, size[0])
        y0, y1 = np.clip(boxes[:, 1], 0, size[1]), np.clip(boxes[:, 1] + boxes[:, 3], 0, size[1])
        clipped = np.stack([x0, y0, x1 - x0, y1 - y0], 1)
        inside = clipped[:, 2] * clipped[:, 3] >= 0.5 * boxes[:, 2] * boxes[:, 3]
        ids, boxes = ids[inside], clipped[inside]
    room = len(ids) if max_people is None else max(max_people - len(dets), 0)
    ids, boxes = ids[:room], boxes[:room]
    k = len(ids)
    if k == 0:
        return dets, np.zeros(len(dets), bool)
    orientation = orientation_conf = None
    if dets.orientation is not None:  # a None confidence stays None: derived from the orientation (NaN -> 0)
        orientation = np.concatenate([dets.orientation, np.full(k, np.nan, np.float32)])
        if dets.orientation_conf is not None:
            orientation_conf = np.concatenate([dets.orientation_conf, np.zeros(k, np.float32)])
    merged = Detections(
        np.concatenate([dets.boxes, boxes.astype(np.float32)]),
        np.concatenate([dets.track_ids, ids]),
        np.concatenate([dets.scores, np.zeros(k, np.float32)]),
        orientation,
        orientation_conf,
    )
    return merged, np.arange(len(merged)) >= len(dets)
