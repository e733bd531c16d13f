"""How high the camera is, in body heights, from the boxes it sees: eye level (a robot) or elevated (CCTV).

For a level pinhole camera at height ``C`` above the ground, a standing person of height ``H`` at depth ``Z``
has a box of height ``h = f H / Z`` whose bottom (the feet) is at row ``y_b = c_y + f C / Z``, so

    y_b = c_y + s * h,  with  s = C / H  (the camera height in body heights) and ``c_y`` the horizon row.

A straight-line fit of the feet row against the box height over many boxes therefore gives ``s``: about
0.3-0.7 for a robot or a hand-held camera, above 1.2 (2.1 m for a 1.75 m person) for a camera that looks down
on people. A camera tilted down bends the line only a little over the frame. Sitting people (shorter boxes)
and detector noise are outliers: the fit is trimmed twice at 2.5 robust standard deviations. The state is a
fixed-size ring of the latest boxes, so the cost per frame is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Elevation:
    """One estimate.

    Attributes:
        body_heights: ``s``, the camera height in body heights (NaN when not known yet).
        horizon_row: ``c_y`` in pixels (NaN when not known yet).
        boxes: how many boxes the fit used.
    """

    body_heights: float
    horizon_row: float
    boxes: int

    @property
    def known(self) -> bool:
        return bool(np.isfinite(self.body_heights))


UNKNOWN = Elevation(float("nan"), float("nan"), 0)


class ElevationEstimator:
    """Running estimate of the camera height in body heights from the boxes of a stream.

    Args:
        capacity: boxes kept (the most recent).
        min_boxes: boxes needed before an estimate is given.
        min_spread: the box heights must vary by at least this coefficient of variation (people at several
            depths); a crowd all at one distance says nothing about the camera height.
    """

    def __init__(self, capacity: int = 2048, min_boxes: int = 60, min_spread: float = 0.12) -> None:
        self.capacity, self.min_boxes, self.min_spread = capacity, min_boxes, min_spread
        self.reset()

    def reset(self) -> None:
        """Forget every box (a new camera)."""
        self._h = np.zeros(self.capacity, np.float64)
        self._yb = np.zeros(self.capacity, np.float64)
        self._count = 0

    def update(self, boxes: np.ndarray, image_size: tuple[int, int]) -> None:
        """Add a frame's boxes (N, 4) ``x, y, w, h`` in pixels (finite, positive size: validated upstream).

        Boxes cut by the top or bottom of the ``(W, H)`` image are skipped: their height is not the person's.
        """
        b = np.asarray(boxes, np.float64).reshape(-1, 4)
        margin = 0.01 * image_size[1]
        b = b[(b[:, 1] > margin) & (b[:, 1] + b[:, 3] < image_size[1] - margin)][-self.capacity :]
        n = len(b)
        if not n:
            return
        slots = (self._count + np.arange(n)) % self.capacity
        self._h[slots] = b[:, 3]
        self._yb[slots] = b[:, 1] + b[:, 3]
        self._count += n

    def estimate(self) -> Elevation:
        """The current :class:`Elevation` (``UNKNOWN`` until enough boxes at enough depths were seen)."""
        n = min(self._count, self.capacity)
        if n < self.min_boxes:
            return UNKNOWN
        h, yb = self._h[:n], self._yb[:n]
        if h.std() < self.min_spread * h.mean():
            return UNKNOWN
        keep = np.ones(n, bool)
        for _ in range(3):  # fit, trim outliers (sitting people, bad boxes), fit again
            slope, intercept = np.polyfit(h[keep], yb[keep], 1)
            resid = yb - (intercept + slope * h)
            scale = 1.4826 * np.median(np.abs(resid[keep] - np.median(resid[keep]))) + 1e-6
            new = np.abs(resid) <= 2.5 * scale
            if new.sum() < self.min_boxes // 2 or np.array_equal(new, keep):
                break
            keep = new
        return Elevation(float(slope), float(intercept), int(keep.sum()))


class AutoOperatingPoint:
    """``operating_point="auto"``: the model's main thresholds until the camera is estimated to be high
    enough for one of its elevated-camera operating points (``min_camera_height`` body heights).

    The estimate is refreshed every ``every`` frames (its cost is a few line fits over at most ``capacity``
    boxes); switching back needs the estimate to fall 0.2 body heights below the bound (no flicker).

    Args:
        default: ``{"p_interact", "confirm_s"}`` of the model's main operating point.
        points: the model's named points that carry ``min_camera_height``.
    """

    HYSTERESIS = 0.2

    def __init__(
        self, default: dict[str, float], points: dict[str, dict[str, float]], every: int = 15
    ) -> None:
        self.default, self.every = default, every
        self.points = sorted(
            points.items(), key=lambda kv: -kv[1]["min_camera_height"]
        )  # highest bound first
        self.estimator = ElevationEstimator()
        self.reset()

    def reset(self) -> None:
        """A new stream: forget the boxes, back to the main point."""
        self.estimator.reset()
        self.name, self.current, self._frames = "default", self.default, 0

    def observe(self, boxes: np.ndarray, image_size: tuple[int, int] | None) -> str | None:
        """Add a frame's boxes; returns a note when the operating point changed, else None."""
        if image_size is None:
            return None
        self.estimator.update(boxes, image_size)
        self._frames += 1
        if self._frames % self.every:
            return None
        est = self.estimator.estimate()
        if not est.known:
            return None
        name, point = "default", self.default
        for candidate, values in self.points:
            bound = values["min_camera_height"] - (self.HYSTERESIS if candidate == self.name else 0.0)
            if est.body_heights >= bound:
                name, point = candidate, values
                break
        if name == self.name:
            return None
        self.name, self.current = name, point
        return (
            f"operating point -> {name} (camera about {est.body_heights:.1f} body heights above the ground, "
            f"from {est.boxes} boxes)"
        )


class SwitchLog:
    """Where an automatic operating point changed: one record per change, ``{"frame", "operating_point",
    "p_interact", "confirm_s"}`` (the thresholds that hold from that frame on).

    A change is recorded at the first frame that runs under it, whether the camera estimate moved it or a
    reset (scene cut) put it back to the main point. At most ``keep`` records are kept (the first ones; a
    stream that flips back and forth stays bounded); :attr:`count` counts them all and :attr:`last` is the
    latest.

    Args:
        start: the point a stream starts at ("default"), or None when nothing switches automatically.
        keep: records kept.
    """

    def __init__(self, start: str | None, keep: int = 100) -> None:
        self.keep = keep
        self.count = 0
        self.last: dict[str, Any] | None = None
        self._now = start
        self._records: list[dict[str, Any]] = []

    @property
    def records(self) -> tuple[dict[str, Any], ...]:
        """The kept records (copies), in order."""
        return tuple(dict(r) for r in self._records)

    def record(
        self, frame: int, name: str | None, p_interact: float, confirm_s: float
    ) -> dict[str, Any] | None:
        """Note the point ``name`` in force at ``frame``; the new record when it changed, else None."""
        if name == self._now:
            return None
        self._now = name
        self.last = {
            "frame": int(frame),
            "operating_point": name,
            "p_interact": float(p_interact),
            "confirm_s": float(confirm_s),
        }
        self.count += 1
        if len(self._records) < self.keep:
            self._records.append(self.last)
        return dict(self.last)
