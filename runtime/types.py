"""What the pipeline returns for each frame: arrays for programs, small objects and JSON for people."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Interaction:
    """One interacting pair.

    Attributes:
        ids: ``(id_a, id_b)`` track ids, ``id_a < id_b``.
        label: stage-2 class name.
        label_id: its index in the model's labels.
        p_interact: stage-1 probability (smoothed).
        probs: stage-2 class probabilities (smoothed), one per label.
    """

    ids: tuple[int, int]
    label: str
    label_id: int
    p_interact: float
    probs: tuple[float, ...]


@dataclass(frozen=True)
class Group:
    """A social group: a connected component of confirmed links (interacting pairs, i.e. with a stage-2
    label, and ``p_interact >= tau_group``); there is no group without a link between its members.

    Attributes:
        members: sorted track ids (at least 2).
        activity: majority label of the within-group interacting pairs; None means "no activity" (``null``
            in JSON), which the pipeline's groups never have since each holds a labelled link.
        activity_id: its index in the model's labels (-1 when None).
        vote_share: fraction of the within-group labelled pairs that voted for ``activity`` (0 when None).
    """

    members: tuple[int, ...]
    activity: str | None
    activity_id: int
    vote_share: float


@dataclass(frozen=True)
class Diagnostics:
    """What the pipeline dropped or noticed in a frame (it never raises mid-stream).

    Attributes:
        frame_dropped: why the image was unusable (flow was skipped), or why the whole frame was dropped
            (then ``stage_error`` is set), or None.
        dropped: reason -> number of detections dropped for it (malformed rows, the ``max_people`` cap,
            tracker suppression, ...).
        notes: other remarks (no previous frame for flow, frame too small for the flow, repaired timestamp,
            frame index or image size, ...).
        non_finite_outputs: classifier stage ("stage1", "stage2") -> pairs removed from the frame because the
            model's logits for them were NaN or inf (a broken or badly quantised model).
        stage_error: ``"<stage>: <exception type>"`` when a stage raised unexpectedly; the frame then has no
            people and no pairs and the stream state was reset. None normally.
    """

    frame_dropped: str | None = None
    dropped: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    non_finite_outputs: Mapping[str, int] = field(default_factory=dict)
    stage_error: str | None = None

    @property
    def clean(self) -> bool:
        """True when nothing was dropped."""
        return (
            self.frame_dropped is None
            and not self.dropped
            and not self.non_finite_outputs
            and self.stage_error is None
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.frame_dropped is not None:
            out["frame_dropped"] = self.frame_dropped
        if self.dropped:
            out["dropped_detections"] = dict(self.dropped)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.non_finite_outputs:
            out["non_finite_outputs"] = dict(self.non_finite_outputs)
        if self.stage_error is not None:
            out["stage_error"] = self.stage_error
        return out


@dataclass(frozen=True)
class FrameResult:
    """The result of one :meth:`Pipeline.step`. Arrays belong to the result (never reused buffers).

    Attributes:
        frame_index: 0-based count of frames this pipeline has seen.
        timestamp: seconds (as used, after repair of a non-finite or decreasing timestamp).
        track_ids: (N,) int64 ids of the kept detections (assigned by the tracker when the input had none).
        boxes: (N, 4) float32 their boxes, ``x y w h`` pixels.
        pairs: (M, 2) int64 every scored pair ``(id_a, id_b)``, ``id_a < id_b``, sorted.
        p_interact: (M,) float32 smoothed stage-1 probability.
        interacting: (M,) bool ``p_interact >= tau_interact`` held for ``confirm_s`` seconds (these pairs went
            through stage 2).
        label_ids: (M,) int64 stage-2 class of interacting pairs, -1 elsewhere.
        probs: (M, C) float32 smoothed stage-2 probabilities of interacting pairs, zeros elsewhere.
        labels: the C stage-2 class names.
        groups: social groups (connected components of the interacting pairs with ``p_interact >=
            tau_group``) with their activity (a label name; None, ``null`` in JSON, means no activity).
        timings_ms: stage name -> wall time in milliseconds (``validate``, ``track``, ``flow``,
            ``features``, ``stage1``, ``stage2``, ``smooth``, ``groups``, ``total``).
        diagnostics: what was dropped or repaired.
        coasted: (N,) bool, True for a person the detector missed in this frame whose box is the built-in
            tracker's prediction (``TrackerConfig.coast_frames``); empty when not given (no one coasted).
    """

    frame_index: int
    timestamp: float
    track_ids: np.ndarray
    boxes: np.ndarray
    pairs: np.ndarray
    p_interact: np.ndarray
    interacting: np.ndarray
    label_ids: np.ndarray
    probs: np.ndarray
    labels: tuple[str, ...]
    groups: tuple[Group, ...]
    timings_ms: Mapping[str, float]
    diagnostics: Diagnostics
    coasted: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    @property
    def coasted_mask(self) -> np.ndarray:
        """(N,) bool: :attr:`coasted`, or all False when it was not given."""
        if len(self.coasted) == len(self.track_ids):
            return np.asarray(self.coasted, bool)
        return np.zeros(len(self.track_ids), bool)

    @property
    def interactions(self) -> list[Interaction]:
        """The interacting pairs as objects (convenience; the arrays are the fast path)."""
        rows = np.flatnonzero(self.interacting)
        return [
            Interaction(
                ids=(int(self.pairs[r, 0]), int(self.pairs[r, 1])),
                label=self.labels[int(self.label_ids[r])],
                label_id=int(self.label_ids[r]),
                p_interact=float(self.p_interact[r]),
                probs=tuple(float(v) for v in self.probs[r]),
            )
            for r in rows.tolist()
        ]

    def to_json_dict(self, *, decimals: int = 4) -> dict[str, Any]:
        """The JSON Lines record of this frame (schema in ``docs/formats.md``)."""
        return {
            "frame": self.frame_index,
            "timestamp": round(self.timestamp, 6),
            "interactions": [
                {
                    "ids": list(i.ids),
                    "label": i.label,
                    "p_interact": round(i.p_interact, decimals),
                    "probs": [round(p, decimals) for p in i.probs],
                }
                for i in self.interactions
            ],
            "groups": [
                {
                    "members": list(g.members),
                    "activity": g.activity or None,  # None is "no activity"
                    "vote_share": round(g.vote_share, decimals),
                }
                for g in self.groups
            ],
            "tracks": [
                {"id": int(t), "box": [round(float(v), 2) for v in b], **({"coasted": True} if c else {})}
                for t, b, c in zip(
                    self.track_ids.tolist(), self.boxes, self.coasted_mask.tolist(), strict=True
                )
            ],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "diagnostics": self.diagnostics.to_dict(),
        }
