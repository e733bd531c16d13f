"""Core value objects. Arrays inside; shapes and dtypes in the docstrings."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pairedge.errors import InputError


@dataclass(frozen=True)
class Detections:
    """The detections of one frame.

    Attributes:
        boxes: (N, 4) float32, ``x y w h`` in pixels, top-left origin.
        track_ids: (N,) int64; -1 where the detector gave no identity.
        scores: (N,) float32 detector confidence (1.0 for ground truth).
    """

    boxes: np.ndarray
    track_ids: np.ndarray
    scores: np.ndarray

    @classmethod
    def from_arrays(
        cls, boxes: np.ndarray, track_ids: np.ndarray | None = None, scores: np.ndarray | None = None
    ) -> Detections:
        """Build with dtype conversion and shape checks; ids default to -1 and scores to 1."""
        b = (
            np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
            if np.size(boxes)
            else np.zeros((0, 4), np.float32)
        )
        n = len(b)
        ids = (
            np.full(n, -1, np.int64)
            if track_ids is None
            else np.asarray(track_ids, dtype=np.int64).reshape(-1)
        )
        sc = np.ones(n, np.float32) if scores is None else np.asarray(scores, dtype=np.float32).reshape(-1)
        if len(ids) != n or len(sc) != n:
            raise InputError(
                f"detections: expected {n} track ids and scores for {n} boxes, got {len(ids)} and {len(sc)}"
            )
        return cls(b, ids, sc)

    @classmethod
    def empty(cls) -> Detections:
        return cls.from_arrays(np.zeros((0, 4), np.float32))

    def __len__(self) -> int:
        return len(self.boxes)

    def subset(self, keep: np.ndarray) -> Detections:
        """Rows selected by a boolean mask or index array."""
        return Detections(self.boxes[keep], self.track_ids[keep], self.scores[keep])
