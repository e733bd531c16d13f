"""Tracker backends by name: the built-in IoU tracker (the zero-dependency default) and the ByteTrack,
OC-SORT and BoT-SORT trackers of Roboflow's ``trackers`` library (Apache-2.0, numpy / scipy / supervision,
no torch), behind one small interface the pipeline steps.

=========== ========================================================================================
name        what
=========== ========================================================================================
``iou``     :class:`~pairedge.runtime.tracker.IoUTracker` (greedy IoU + constant velocity, coasting);
            the default, no dependency beyond numpy
``bytetrack`` ``trackers.ByteTrackTracker``: Kalman filter, Hungarian IoU matching, a second pass on
            low-score boxes (Zhang et al. 2022)
``ocsort``  ``trackers.OCSORTTracker``: observation-centric re-update and momentum (Cao et al. 2023)
``botsort`` ``trackers.BoTSORTTracker``: ByteTrack's matching with **camera-motion compensation** (a global
            affine motion of the image estimated by OpenCV sparse optical flow on the frame, applied to
            every track's Kalman state before matching; Aharon et al. 2022): the one for a moving robot
=========== ========================================================================================

The library trackers run with the library's defaults (no library parameter chosen on any benchmark) on the
boxes left after the built-in tracker's duplicate suppression (``TrackerConfig.nms_iou``, 0.35 by default:
a raw detector's duplicate boxes would each start a track; on PETS's raw ACF boxes the suppression lifts
BoT-SORT's IDF1 from 0.43 to 0.67, see ``benchmarks/bench_tracking.py``), and with the pipeline's timestamps,
so their lost-track budget (``lost_track_buffer`` 30 reference frames = 1 s) and Kalman steps follow real time
at any frame rate. Their confidence thresholds (``track_activation_threshold`` 0.7,
``high_conf_det_threshold`` 0.6) assume detector scores in [0, 1] (an ONNX detector's); a detector whose
scores are margins (PETS's ACF, 0 to 139; OpenCV's HOG) makes nearly every box "high". They coast no
one: a person the detector misses is absent that frame (the library keeps the lost track to re-find it).
Camera-motion compensation needs the image, so ``botsort`` in box-only mode (no frame) runs without it.

Their ids are offset to start at 1 and keep increasing across :meth:`LibraryTracker.reset` (a scene cut),
as the built-in tracker's do; a detection without an id (a track not yet confirmed: the library's
``minimum_consecutive_frames``) gets -1.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pairedge.core.boxes import nms_keep
from pairedge.core.errors import InputError
from pairedge.core.optional import require
from pairedge.runtime.tracker import IoUTracker, TrackerConfig

#: name -> the ``trackers`` class it runs (the built-in ``iou`` is not in the library). Read-only.
LIBRARY_TRACKERS: Mapping[str, str] = MappingProxyType(
    {"bytetrack": "ByteTrackTracker", "ocsort": "OCSORTTracker", "botsort": "BoTSORTTracker"}
)
#: The default tracker backend (built in, no dependency).
DEFAULT_TRACKER = "iou"
#: Every tracker backend name, the default first.
TRACKER_NAMES: tuple[str, ...] = (DEFAULT_TRACKER, *LIBRARY_TRACKERS)
#: The pairedge extra that installs the library trackers.
EXTRA = "trackers"
#: Why the install line is two commands (``trackers`` requires ``opencv-python``, which shares the ``cv2``
#: folder with pairedge's ``opencv-contrib-python-headless`` and, in OpenCV 5, has no HOG people detector).
INSTALL_NOTE = (
    "then `pip install --no-deps 'trackers>=2.6,<2.7'` (trackers requires opencv-python, which would "
    "overwrite pairedge's OpenCV build and its HOG detector)"
)


@runtime_checkable
class TrackerBackend(Protocol):
    """What the pipeline asks of a tracker (:class:`IoUTracker` and :class:`LibraryTracker` are ones)."""

    def step(
        self,
        boxes: np.ndarray,
        timestamp: float,
        scores: np.ndarray | None = None,
        frame: np.ndarray | None = None,
    ) -> np.ndarray:
        """(N,) int64 ids of the frame's boxes (N, 4) ``x y w h``; -1 for a box without one."""
        ...

    def coasting(self, timestamp: float, present: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(K,) ids and (K, 4) predicted boxes of the tracks to keep through a short detection gap."""
        ...

    def reset(self) -> None:
        """Forget every track (ids keep increasing)."""
        ...


def check_tracker_name(name: object) -> str:
    """``name`` lower-cased when it is a tracker backend.

    Raises:
        InputError: not one of :data:`TRACKER_NAMES`.
    """
    key = str(name).strip().lower() if isinstance(name, str) else ""
    if key not in TRACKER_NAMES:
        raise InputError(f"tracker backend: expected one of {', '.join(TRACKER_NAMES)}, got {name!r}")
    return key


def tracker_phrase(name: str) -> str:
    """How run notes name the tracker: "the built-in tracker" or "the <name> tracker (trackers library)"."""
    key = check_tracker_name(name)
    return "the built-in tracker" if key == DEFAULT_TRACKER else f"the {key} tracker (trackers library)"


def make_tracker(name: str = DEFAULT_TRACKER, config: TrackerConfig | None = None) -> TrackerBackend:
    """A new tracker backend by name.

    Args:
        name: one of :data:`TRACKER_NAMES`.
        config: the built-in tracker's options (the library trackers take only its ``nms_iou``, the duplicate
            suppression before tracking; their own parameters stay the library's defaults).

    Raises:
        InputError: unknown name. MissingDependencyError: a library tracker without ``trackers`` installed.
    """
    key = check_tracker_name(name)
    if key == DEFAULT_TRACKER:
        return IoUTracker(config)
    return LibraryTracker(key, nms_iou=(config or TrackerConfig()).nms_iou)


def _library() -> Any:

    return require(
        "trackers",
        extra=EXTRA,
        purpose="the bytetrack / ocsort / botsort tracker backends",
        name="Roboflow's trackers library",
        note=INSTALL_NOTE,
    )


class LibraryTracker:
    """A ``trackers`` library tracker behind :class:`TrackerBackend` (see the module docstring).

    Args:
        name: ``bytetrack``, ``ocsort`` or ``botsort``.
        nms_iou: a box overlapping a higher-scored box of the frame by more than this IoU is a duplicate and
            gets id -1 without reaching the library (as :class:`TrackerConfig`'s); None passes every box.
        **params: keyword arguments of the library class (its defaults otherwise), e.g.
            ``lost_track_buffer=60``; a name the class does not take is refused.

    Raises:
        InputError: unknown name or parameter. MissingDependencyError: ``trackers`` is not installed.
    """

    def __init__(self, name: str, nms_iou: float | None = TrackerConfig.nms_iou, **params: Any) -> None:
        key = check_tracker_name(name)
        if key not in LIBRARY_TRACKERS:
            raise InputError(
                f"tracker backend {name!r} is built in, not a trackers-library one; use make_tracker"
            )
        lib = _library()
        import supervision as sv

        cls = getattr(lib, LIBRARY_TRACKERS[key])
        accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
        unknown = sorted(set(params) - accepted)
        if unknown:
            raise InputError(
                f"tracker {key}: unknown parameter(s) {unknown}; expected some of {sorted(accepted)}"
            )
        self.name = key
        self.nms_iou = TrackerConfig(nms_iou=nms_iou).nms_iou  # validated as the built-in tracker's
        self._sv = sv
        self._impl = cls(**params)
        #: whether the tracker reads the image (BoT-SORT's camera-motion compensation)
        self.uses_frame = bool(getattr(self._impl, "enable_cmc", False))
        self._base = 1  # pairedge id = library id + base; raised past every id given at a reset
        self._top = 0  # the largest pairedge id given so far

    @property
    def num_tracks(self) -> int:
        """Confirmed tracks the library keeps alive (seen, or lost within its budget)."""
        return sum(int(getattr(t, "tracker_id", -1)) >= 0 for t in self._impl.tracks)

    def step(
        self,
        boxes: np.ndarray,
        timestamp: float,
        scores: np.ndarray | None = None,
        frame: np.ndarray | None = None,
    ) -> np.ndarray:
        """Track one frame.

        Args:
            boxes: (N, 4) float ``x y w h`` pixels.
            timestamp: seconds, non-decreasing.
            scores: (N,) detector scores, or None (the library then treats every box as confident).
            frame: (H, W, 3) uint8 BGR or (H, W) uint8 gray, for camera-motion compensation (``botsort``);
                ignored by the others; None: no compensation this frame.

        Returns:
            (N,) int64 ids (>= 1), -1 for a box that got none (a duplicate, not yet confirmed, or an unmatched
            low-score box).
        """
        det = np.asarray(boxes, np.float64).reshape(-1, 4)
        conf = None if scores is None else np.asarray(scores, np.float32).reshape(-1)
        rows = np.arange(len(det))
        if self.nms_iou is not None and len(det):
            rows = np.flatnonzero(nms_keep(det, np.ones(len(det)) if conf is None else conf, self.nms_iou))
        kept = det[rows]
        xyxy = np.concatenate([kept[:, :2], kept[:, :2] + kept[:, 2:]], axis=1).astype(np.float32)
        sv_dets = self._sv.Detections(
            xyxy=xyxy, confidence=None if conf is None else conf[rows], data={"row": rows}
        )
        image = self._bgr(frame) if self.uses_frame else None
        out = self._impl.update(sv_dets, frame=image, timestamp=float(timestamp))
        ids = np.full(len(det), -1, np.int64)
        if len(out):
            tid = np.asarray(out.tracker_id, np.int64)
            ids[np.asarray(out.data["row"], np.int64)] = np.where(tid >= 0, tid + self._base, -1)
        if len(ids):
            self._top = max(self._top, int(ids.max()))
        return ids

    def coasting(self, timestamp: float, present: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """None: the library trackers report only detected people (see the module docstring)."""
        return np.zeros(0, np.int64), np.zeros((0, 4), np.float64)

    def reset(self) -> None:
        """Forget every track; later ids start above every id given so far."""
        self._impl.reset()
        self._base = self._top + 1

    @staticmethod
    def _bgr(frame: np.ndarray | None) -> np.ndarray | None:
        if frame is None:
            return None
        if frame.ndim == 2:
            import cv2

            return cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
        return frame
