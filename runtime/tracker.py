"""The built-in tracker: ids for detections without identities (numpy and OpenCV only).

Method (ByteTrack's association with a colour appearance cue; Zhang et al. 2022). Every track carries a
constant-velocity Kalman filter of its box (:mod:`pairedge.runtime.tracking.kalman`, in seconds, so any frame
rate works) and, when frames come with the boxes, the running colour appearance of its person
(:mod:`pairedge.runtime.tracking.appearance`). For each frame, after duplicate suppression (``nms_iou``):

1. the boxes scoring at least ``high_score`` are matched to the confirmed and the lost tracks, predicted to
   the frame's timestamp, by the Hungarian algorithm on ``(1 - w) * IoU + w * appearance`` (``w`` =
   ``appearance_weight``; IoU alone without frames), among the pairs with IoU >= ``min_iou``;
2. the confirmed tracks seen in the previous frame and still unmatched take the boxes scoring between
   ``low_score`` and ``high_score`` (a partly hidden person scores low) at IoU >= ``low_iou``;
3. tentative tracks (born in an earlier frame, not yet confirmed) take the high boxes left at IoU >=
   ``new_iou``; one left unmatched is dropped. A tentative track is confirmed, and gets its id, once it was
   matched ``confirm_hits`` times in all and one of its boxes scored at least ``new_score``: an object a
   detector keeps scoring just above ``high_score`` (a sign, a bin) stays tentative for ever;
4. the high boxes still left start tentative tracks (confirmed at once in the first frame of a stream when
   they score ``new_score``, as ByteTrack does); a confirmed track unmatched for more than ``max_age``
   frames ends.

A box that gets no id (a duplicate, a low-score box no track takes, a tentative track's) gets -1. Scores
outside [0, 1] (SVM margins: OpenCV's HOG, PETS's ACF detections) are not probabilities: a stream that has
one is tracked with every box counted as high and able to start a track.

Coasting (``coast_frames > 0``): :meth:`IoUTracker.coasting` gives the confirmed tracks matched at least
``coast_min_hits`` times and unseen for at most ``coast_frames`` frames, at their predicted boxes, so the
pipeline keeps those people (marked ``coasted``) through a short detection gap.

State lives in fixed arrays of ``max_tracks`` rows (bounded memory); when they are full the longest-unseen
track is evicted first. The settings were chosen on the first half of PETS 2009 S2.L1 with the bundled
detector and on simulator validation scenes; ``benchmarks/bench_camera.py`` reports the other half and
held-out scenes. Limits: no camera-motion compensation (on a fast-turning robot use ``botsort`` of
:mod:`pairedge.runtime.tracker_backends`), and a person hidden for more than ``max_age`` frames comes back
with a new id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pairedge.core.assignment import max_weight_assignment
from pairedge.core.boxes import iou_matrix, nms_keep
from pairedge.core.errors import InputError
from pairedge.core.settings import setting
from pairedge.core.types import Detections
from pairedge.runtime.tracking import appearance, kalman

_TENTATIVE, _TRACKED, _LOST = 0, 1, 2


@dataclass(frozen=True)
class TrackerConfig:
    """Options of :class:`IoUTracker` (thresholds inclusive; see the module docstring for their roles).

    Attributes:
        high_score: boxes scoring at least this are matched first and may start (tentative) tracks.
        low_score: boxes scoring below this are ignored; between the two they only continue tracks.
        new_score: a tentative track is confirmed once one of its boxes scored at least this.
        min_iou: IoU of a high box with a track's predicted box needed to match it.
        low_iou: the same for a low-score box.
        new_iou: the same for a tentative track.
        confirm_hits: matches a new track needs before it is confirmed and gets an id (1: at once).
        appearance_weight: weight of the colour appearance against IoU in the first match, in [0, 1].
        appearance_momentum: weight of a track's running appearance against a new box's, in [0, 1).
        max_age: frames a confirmed track survives without a detection.
        max_tracks: capacity of the state arrays (bounded memory).
        nms_iou: detections overlapping a higher-scored detection of the same frame by more than this IoU
            are duplicates (detectors without non-maximum suppression emit them) and get id -1; None keeps
            every detection. 0.35 is the safe side for raw detector files (PETS's ACF duplicates sit at
            IoU 0.35-0.5); a pairedge detector, which already suppressed its duplicates, runs with None so
            that overlapping group members stay.
        coast_frames: a confirmed track unseen for at most this many frames is reported by
            :meth:`IoUTracker.coasting` at its predicted box (0: never; must not exceed ``max_age``). This
            default (3) and ``SmoothingConfig.grace_frames`` are chosen together on simulator validation
            scenes (``benchmarks/bench_tracker.py``).
        coast_min_hits: only tracks matched at least this many times coast.
        noise: the Kalman filter's noise (:class:`~pairedge.runtime.tracking.kalman.MotionNoise`).
    """

    high_score: float = 0.5
    low_score: float = 0.1
    new_score: float = 0.8
    min_iou: float = 0.2
    low_iou: float = 0.5
    new_iou: float = 0.3
    confirm_hits: int = 2
    appearance_weight: float = 0.7
    appearance_momentum: float = 0.9
    max_age: int = 30
    max_tracks: int = 512
    nms_iou: float | None = 0.35
    coast_frames: int = field(
        default=3,
        metadata=setting(
            "Frames the built-in tracker keeps a person the detector missed, at the predicted box (marked "
            "coasted in the output), so a short miss does not cut their links; 0 = never. The default is "
            "chosen on simulator validation scenes (benchmarks/bench_tracker.py).",
            low=0,
            high=15,
        ),
    )
    coast_min_hits: int = 3
    noise: kalman.MotionNoise = kalman.MotionNoise()

    def __post_init__(self) -> None:
        for name in (
            "high_score",
            "low_score",
            "new_score",
            "min_iou",
            "low_iou",
            "new_iou",
            "appearance_weight",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise InputError(f"tracker config: {name} must be a number in [0, 1], got {value!r}")
        if not self.low_score <= self.high_score <= self.new_score:
            raise InputError(
                f"tracker config: expected low_score <= high_score <= new_score, got {self.low_score} / "
                f"{self.high_score} / {self.new_score}"
            )
        if not 0.0 <= self.appearance_momentum < 1.0:
            raise InputError(
                f"tracker config: appearance_momentum must lie in [0, 1), got {self.appearance_momentum!r}"
            )
        ints = {"confirm_hits": 1, "max_age": 0, "max_tracks": 1, "coast_min_hits": 1, "coast_frames": 0}
        for name, least in ints.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InputError(f"tracker config: {name} must be an integer >= {least}, got {value!r}")
        nms = self.nms_iou
        if nms is not None and (
            isinstance(nms, bool) or not isinstance(nms, int | float) or not 0.0 < nms <= 1.0
        ):
            raise InputError(
                f"tracker config: nms_iou must be an IoU in (0, 1] or None (no suppression), got {nms!r}"
            )
        if self.coast_frames > self.max_age:
            raise InputError(
                f"tracker config: expected coast_frames <= max_age; got {self.coast_frames} > {self.max_age}"
            )
        if not isinstance(self.noise, kalman.MotionNoise):
            raise InputError(f"tracker config: noise must be a MotionNoise, got {type(self.noise).__name__}")


def _assign(iou: np.ndarray, least: float, weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Hungarian matching maximising ``weight`` (default ``iou``) among the pairs with ``iou >= least``."""
    if iou.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    valid = iou >= least
    if not valid.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    score = iou if weight is None else weight
    rows, cols = max_weight_assignment(np.where(valid, np.maximum(score, 1e-9), 0.0))
    ok = valid[rows, cols]
    return rows[ok], cols[ok]


class IoUTracker:
    """Assigns track ids to per-frame detections (see the module docstring for the method and its limits).

    Args:
        config: :class:`TrackerConfig`; None for the defaults.
    """

    def __init__(self, config: TrackerConfig | None = None) -> None:
        self.config = config or TrackerConfig()
        k = self.config.max_tracks
        self._x = np.zeros((k, 8))  # Kalman state cx cy w h vx vy vw vh
        self._cov = np.zeros((k, 8, 8))
        self._emb = np.zeros((k, appearance.SIZE), np.float32)  # running appearance (zero: none yet)
        self._time = np.zeros(k)  # timestamp the state is predicted to
        self._misses = np.zeros(k, np.int64)  # frames unseen
        self._hits = np.zeros(k, np.int64)  # detections matched (the birth counts)
        self._best = np.zeros(k)  # the best score of the boxes matched (a tentative track's confirmation)
        self._state = np.zeros(k, np.int64)
        self._ids = np.full(k, -1, np.int64)
        self._alive = np.zeros(k, bool)
        self._next_id = 1
        self._fresh = True  # no frame since the start or the last reset: births are confirmed at once
        self._margins = False  # the stream's scores are not probabilities

    @property
    def num_tracks(self) -> int:
        """Confirmed tracks currently alive (seen within ``max_age`` frames)."""
        return int((self._alive & (self._state != _TENTATIVE)).sum())

    def reset(self) -> None:
        """Forget every track (ids keep increasing)."""
        self._alive[:] = False
        self._fresh, self._margins = True, False

    def predicted_boxes(self, slots: np.ndarray, timestamp: float) -> np.ndarray:
        """(len(slots), 4) boxes ``x y w h`` of the given tracks predicted to ``timestamp`` (state
        unchanged)."""
        x = self._x[slots].copy()
        x[:, 0:4] += x[:, 4:8] * np.clip(timestamp - self._time[slots], 0.0, None)[:, None]
        return kalman.boxes_of(x)

    def coasting(self, timestamp: float, present: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The tracks to keep through a short detection gap, after :meth:`step` of the frame at ``timestamp``.

        Args:
            timestamp: the frame's time, seconds.
            present: (N, 4) the frame's kept detections, ``x y w h``: a prediction overlapping one of them by
                IoU above ``nms_iou`` (its default 0.35 when None) is left out (a second box on one person).

        Returns:
            ids: (K,) int64 ids of the confirmed tracks unseen for 1 to ``coast_frames`` frames that were
            matched at least ``coast_min_hits`` times (K = 0 when ``coast_frames`` is 0).
            boxes: (K, 4) float64 their boxes predicted to ``timestamp``, ``x y w h`` (not clipped).
        """
        cfg = self.config
        slots = np.flatnonzero(
            self._alive
            & (self._state == _LOST)
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
        self,
        boxes: np.ndarray,
        timestamp: float,
        scores: np.ndarray | None = None,
        frame: np.ndarray | None = None,
    ) -> np.ndarray:
        """Track one frame.

        Args:
            boxes: (N, 4) float ``x y w h`` pixels, finite with positive size (validated upstream).
            timestamp: seconds, non-decreasing.
            scores: (N,) detector scores, or None (all 1).
            frame: the (H, W, 3) uint8 BGR image for the appearance cue, or None (IoU alone).

        Returns:
            (N,) int64 track ids; -1 for a detection no confirmed track holds.
        """
        cfg = self.config
        det = np.asarray(boxes, np.float64).reshape(-1, 4)
        sc = np.ones(len(det)) if scores is None else np.asarray(scores, np.float64).reshape(-1)
        ids = np.full(len(det), -1, np.int64)
        if len(sc) and ((sc < 0) | (sc > 1)).any():
            self._margins = True
        usable = np.ones(len(det), bool) if cfg.nms_iou is None else nms_keep(det, sc, cfg.nms_iou)
        high_mask = usable & ((sc >= cfg.high_score) | self._margins)
        high = np.flatnonzero(high_mask)
        low = np.flatnonzero(usable & ~high_mask & (sc >= cfg.low_score))
        emb = self._appearance(frame, det, high)
        live = np.flatnonzero(self._alive)
        self._predict(live, timestamp)
        pred = np.zeros((len(self._x), 4))
        pred[live] = kalman.boxes_of(self._x[live])
        matched = np.zeros(len(self._x), bool)

        # 1: confirmed and lost tracks x high boxes, IoU + appearance
        pool = live[self._state[live] != _TENTATIVE]
        iou = iou_matrix(pred[pool], det[high])
        r, c = _assign(iou, cfg.min_iou, self._similarity(pool, emb, iou))
        self._match(pool[r], high[c], det, sc, emb[c], ids, matched)
        high_left = np.delete(high, c)
        emb_left = np.delete(emb, c, axis=0)
        # 2: tracks seen last frame x low boxes, IoU
        pool = live[(self._state[live] == _TRACKED) & ~matched[live]]
        r, c = _assign(iou_matrix(pred[pool], det[low]), cfg.low_iou)
        self._match(pool[r], low[c], det, sc, None, ids, matched)
        # 3: tentative tracks x the high boxes left, IoU
        pool = live[self._state[live] == _TENTATIVE]
        r, c = _assign(iou_matrix(pred[pool], det[high_left]), cfg.new_iou)
        self._match(pool[r], high_left[c], det, sc, emb_left[c], ids, matched)
        high_left, emb_left = np.delete(high_left, c), np.delete(emb_left, c, axis=0)

        unmatched = live[~matched[live]]
        tentative = unmatched[self._state[unmatched] == _TENTATIVE]
        self._alive[tentative] = False
        unseen = unmatched[self._state[unmatched] != _TENTATIVE]
        self._misses[unseen] += 1
        self._state[unseen] = _LOST
        self._alive[unseen[self._misses[unseen] > cfg.max_age]] = False
        ids[high_left] = self._birth(det[high_left], sc[high_left], emb_left, timestamp)
        self._fresh = False
        return ids

    # -- the steps --------------------------------------------------------------------------------------
    def _appearance(self, frame: np.ndarray | None, det: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(len(rows), SIZE) appearances of the boxes ``det[rows]`` (zeros without a colour frame or
        weight)."""
        if (
            self.config.appearance_weight == 0.0
            or not isinstance(frame, np.ndarray)
            or frame.ndim != 3
            or frame.shape[2] != 3
            or frame.dtype != np.uint8
        ):
            return np.zeros((len(rows), appearance.SIZE), np.float32)
        return appearance.embed(frame, det[rows])

    def _predict(self, slots: np.ndarray, timestamp: float) -> None:
        x, cov = self._x[slots], self._cov[slots]
        kalman.predict(x, cov, timestamp - self._time[slots], self.config.noise)
        self._x[slots], self._cov[slots], self._time[slots] = x, cov, timestamp

    def _similarity(self, slots: np.ndarray, emb: np.ndarray, iou: np.ndarray) -> np.ndarray:
        """IoU blended with the appearance (Bhattacharyya coefficient) where both sides have one."""
        w = self.config.appearance_weight
        if w == 0.0 or iou.size == 0:
            return iou
        track = self._emb[slots]
        both = (track.any(axis=1)[:, None]) & (emb.any(axis=1)[None, :])
        return np.where(both, (1 - w) * iou + w * (track @ emb.T), iou)

    def _match(
        self,
        slots: np.ndarray,
        rows: np.ndarray,
        det: np.ndarray,
        scores: np.ndarray,
        emb: np.ndarray | None,
        ids: np.ndarray,
        matched: np.ndarray,
    ) -> None:
        """Update the tracks ``slots`` with the boxes ``det[rows]`` of ``scores[rows]`` (and appearances
        ``emb``,
        None: keep); confirm the tentative ones that qualify."""
        if len(slots) == 0:
            return
        x, cov = self._x[slots], self._cov[slots]
        kalman.update(x, cov, det[rows], self.config.noise)
        self._x[slots], self._cov[slots] = x, cov
        self._misses[slots] = 0
        self._hits[slots] += 1
        self._best[slots] = np.maximum(self._best[slots], scores[rows])
        matched[slots] = True
        tentative = slots[self._state[slots] == _TENTATIVE]
        confirm = tentative[self._confirmable(tentative)]
        self._ids[confirm] = np.arange(self._next_id, self._next_id + len(confirm))
        self._next_id += len(confirm)
        self._state[slots] = np.where(self._state[slots] == _TENTATIVE, self._state[slots], _TRACKED)
        self._state[confirm] = _TRACKED
        if emb is not None:
            self._blend(slots, emb)
        ids[rows] = np.where(self._state[slots] == _TRACKED, self._ids[slots], -1)

    def _blend(self, slots: np.ndarray, emb: np.ndarray) -> None:
        """Running appearance: ``m * old + (1 - m) * new`` re-normalised (a track without one takes the
        new)."""
        old = self._emb[slots]
        have = emb.any(axis=1)
        m = np.where(old.any(axis=1), self.config.appearance_momentum, 0.0)[:, None]
        mixed = m * old + (1 - m) * emb
        norm = np.linalg.norm(mixed, axis=1, keepdims=True)
        self._emb[slots] = np.where(have[:, None], mixed / np.maximum(norm, 1e-12), old)

    def _confirmable(self, slots: np.ndarray) -> np.ndarray:
        """Which tentative tracks qualify: matched ``confirm_hits`` times, one of their boxes scoring at least
        ``new_score`` (any box of a stream of margin scores)."""
        confident = (self._best[slots] >= self.config.new_score) | self._margins
        return (self._hits[slots] >= self.config.confirm_hits) & confident

    def _birth(self, det: np.ndarray, scores: np.ndarray, emb: np.ndarray, timestamp: float) -> np.ndarray:
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
        k = len(slots)
        self._x[slots], self._cov[slots] = kalman.initial(det[:k], self.config.noise)
        self._emb[slots] = emb[:k]
        self._time[slots] = timestamp
        self._misses[slots] = 0
        self._hits[slots] = 1
        self._best[slots] = scores[:k]
        self._alive[slots] = True
        now = ((scores[:k] >= self.config.new_score) | self._margins) & (
            self._fresh or self.config.confirm_hits <= 1
        )
        self._state[slots] = np.where(now, _TRACKED, _TENTATIVE)
        self._ids[slots] = -1
        self._ids[slots[now]] = np.arange(self._next_id, self._next_id + int(now.sum()))
        self._next_id += int(now.sum())
        out = np.full(n, -1, np.int64)
        out[:k] = self._ids[slots]
        return out


def with_coasted(
    tracker: IoUTracker,
    dets: Detections,
    timestamp: float,
    size: tuple[int, int] | None,
    max_people: int | None,
) -> tuple[Detections, np.ndarray]:
    """The frame's tracked detections with the tracker's coasting people appended (after
    :meth:`IoUTracker.step`).

    Predicted boxes are clipped to the image ``size`` ``(W, H)`` (None: not clipped); one less than half
    inside it (a person walking out) is left out; at most ``max_people`` people in all (None: no cap). Coasted
    people get score 0 and, when the detections carry orientations, an unknown one (NaN, confidence 0).

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
