"""What a run accumulates and reports: :class:`RunStats` (updated once per frame, bounded whatever the stream)
and the :class:`RunSummary` it ends with (people, pairs, interactions by label, per-stage latency percentiles,
FPS, everything dropped, how many frames were scored and had optical flow)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from pairedge.runtime.pipeline import STAGES
from pairedge.runtime.types import FrameResult

TIMED = (*STAGES, "total")


@dataclass(frozen=True)
class RunSummary:
    """What a run did.

    Attributes:
        frames: frames processed.
        people_per_frame: mean number of kept detections per frame.
        tracks: distinct track ids seen.
        pairs: pair-frames scored by stage 1.
        interacting: pair-frames that passed the gate (and went through stage 2).
        interactions: stage-2 label -> interacting pair-frames.
        groups: group-frames (groups summed over frames).
        latency_ms: stage -> {"p50", "p90", "p99", "mean"} milliseconds of :meth:`Pipeline.step`.
        fps: frames per second of the pipeline alone (1000 / mean ``total``).
        wall_fps: frames per second end to end (decoding, pipeline and writing).
        frames_dropped: why frames were unusable -> count.
        detections_dropped: why detections were dropped -> count.
        notes: remarks (frame mapping, detections outside the video, ...).
        error: why the stream ended early (truncated video), else None.
        files: output name -> path.
        pipeline: :meth:`Pipeline.describe` of the pipeline that ran.
        frames_scored: frames the pipeline scored: its image usable (or not needed, box-only) and no stage
            failed. 0 means nothing at all was scored (``pairedge run`` then exits 1).
        flow_frames: frames that had an optical-flow field; None when the model uses no flow. 0 with a flow
            model means the flow never ran (``pipeline["flow_problem"]`` says why; a note says so too).
        operating_point_switches: where an automatic operating point changed: ``{"frame",
            "operating_point", "p_interact", "confirm_s"}`` (the thresholds from that frame on).
        detector: without a detection file, the detector's figures (``DetectorTimer.record``: what ran, its
            layout, frames, boxes, ms per frame, non-finite candidates); None otherwise.
        live: a live source's counts (:meth:`pairedge.runtime.runner.live.LiveStats.to_dict`: frames captured,
            delivered, dropped, refused, outages, reconnects, reconnect_attempts, ended); None otherwise.
    """

    frames: int
    people_per_frame: float
    tracks: int
    pairs: int
    interacting: int
    interactions: dict[str, int]
    groups: int
    latency_ms: dict[str, dict[str, float]]
    fps: float
    wall_fps: float
    frames_dropped: dict[str, int] = field(default_factory=dict)
    detections_dropped: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    error: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    pipeline: dict[str, Any] = field(default_factory=dict)
    frames_scored: int = 0
    flow_frames: int | None = None
    operating_point_switches: tuple[dict[str, Any], ...] = ()
    detector: dict[str, Any] | None = None
    live: dict[str, Any] | None = None

    def unscored(self) -> str | None:
        """Why nothing at all was scored (no frame read, or every frame dropped), or None. ``pairedge run``
        and ``pairedge eval`` both exit 1 on it: nothing scored is an error, never a row of zeros."""
        if self.frames_scored > 0:
            return None
        if self.frames == 0:
            return "no frame was processed (an empty stream, or --max-frames cut it); nothing was scored"
        reason, count = max(self.frames_dropped.items(), key=lambda kv: kv[1], default=("unknown", 0))
        return (
            f"no frame was scored: all {self.frames} frames were dropped ({count} x {reason}); "
            "results.jsonl lists each frame's reason"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (``summary.json``)."""
        out = asdict(self)
        out["notes"] = list(self.notes)
        out["operating_point_switches"] = [dict(s) for s in self.operating_point_switches]
        return out


class RunStats:
    """Accumulates :class:`FrameResult` objects into a :class:`RunSummary` (one per run).

    Memory does not grow with the number of frames: per-stage timings are kept for the last ``max_samples``
    frames (float32, 36 bytes per frame; latency percentiles cover that window, means cover every frame), the
    other figures are running counts. Distinct track ids are a set, so that part grows with the number of
    distinct tracks (about 100 bytes each; a stream that keeps meeting new people keeps adding them).
    """

    def __init__(self, labels: tuple[str, ...], max_samples: int = 100_000) -> None:
        self.labels = labels
        self.max_samples = max(int(max_samples), 1)
        self._window = np.zeros((min(1024, self.max_samples), len(TIMED)), np.float32)
        self._sums = np.zeros(len(TIMED), np.float64)
        self._count = 0
        self._scored = 0
        self._people = self._pairs = self._interacting = self._groups = 0
        self._label_counts = np.zeros(len(labels), np.int64)
        self._tracks: set[int] = set()
        self._frames_dropped: dict[str, int] = {}
        self._dets_dropped: dict[str, int] = {}
        self._start = time.perf_counter()

    @property
    def frames(self) -> int:
        return self._count

    def add(self, result: FrameResult) -> None:
        """Count one frame's result."""
        row = [float(result.timings_ms.get(s, 0.0)) for s in TIMED]
        if self._count == len(self._window) and len(self._window) < self.max_samples:
            grown = np.zeros((min(2 * len(self._window), self.max_samples), len(TIMED)), np.float32)
            grown[: self._count] = self._window
            self._window = grown
        self._window[self._count % len(self._window)] = row
        self._sums += row
        self._count += 1
        self._people += len(result.track_ids)
        self._tracks.update(result.track_ids.tolist())
        self._pairs += len(result.pairs)
        labels = result.label_ids[result.interacting]
        self._interacting += len(labels)
        if len(labels):
            self._label_counts += np.bincount(labels, minlength=len(self.labels))[: len(self.labels)]
        self._groups += len(result.groups)
        diag = result.diagnostics
        if diag.frame_dropped is not None:  # also set when a stage failed (stage_error)
            _count(self._frames_dropped, diag.frame_dropped, 1)
        else:
            self._scored += 1
        for reason, count in diag.dropped.items():
            _count(self._dets_dropped, reason, int(count))

    def summary(
        self,
        *,
        notes: Iterable[str] = (),
        error: str | None = None,
        files: dict[str, str] | None = None,
        pipeline: dict[str, Any] | None = None,
        detector: dict[str, Any] | None = None,
        live: dict[str, Any] | None = None,
    ) -> RunSummary:
        """The summary of everything added so far (``pipeline``: :meth:`Pipeline.describe` at the end, which
        also gives the flow and operating-point figures)."""
        n = self.frames
        pipeline = dict(pipeline or {})
        wall = time.perf_counter() - self._start
        t = self._window[: min(n, len(self._window))].astype(np.float64)  # the last max_samples frames
        latency = {
            stage: (
                {
                    "p50": float(np.percentile(t[:, k], 50)),
                    "p90": float(np.percentile(t[:, k], 90)),
                    "p99": float(np.percentile(t[:, k], 99)),
                    "mean": float(self._sums[k] / n),
                }
                if n
                else {"p50": 0.0, "p90": 0.0, "p99": 0.0, "mean": 0.0}
            )
            for k, stage in enumerate(TIMED)
        }
        mean_total = latency["total"]["mean"]
        return RunSummary(
            frames=n,
            people_per_frame=self._people / n if n else 0.0,
            tracks=len(self._tracks),
            pairs=self._pairs,
            interacting=self._interacting,
            interactions={
                name: int(c) for name, c in zip(self.labels, self._label_counts.tolist(), strict=True)
            },
            groups=self._groups,
            latency_ms=latency,
            fps=1000.0 / mean_total if mean_total > 0 else 0.0,
            wall_fps=n / wall if wall > 0 else 0.0,
            frames_dropped=dict(self._frames_dropped),
            detections_dropped=dict(self._dets_dropped),
            notes=tuple(notes),
            error=error,
            files=dict(files or {}),
            pipeline=pipeline,
            frames_scored=self._scored,
            flow_frames=pipeline.get("flow_frames"),
            operating_point_switches=tuple(pipeline.get("operating_point_switches") or ()),
            detector=dict(detector) if detector is not None else None,
            live=dict(live) if live is not None else None,
        )


#: Distinct reasons counted per kind in a summary; more (e.g. exception texts of a hostile stream) are pooled.
MAX_REASONS = 100


def _count(counts: dict[str, int], reason: str, n: int) -> None:
    """``counts[reason] += n`` with at most MAX_REASONS keys (the rest go to one "other reasons" entry)."""
    if reason not in counts and len(counts) >= MAX_REASONS:
        reason = "other reasons (more than 100 distinct)"
    counts[reason] = counts.get(reason, 0) + n
