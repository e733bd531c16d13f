"""Pairing camera images with the detector's output by header stamp, with bounded buffers.

A detector copies the image's header stamp into its output, usually exactly; ``tolerance`` allows for one
that restamps (default 10 ms: well under a frame at 30 fps). Messages wait for their partner at most
``horizon`` (default 2 s, measured in header time against the newest stamp seen) and at most
``max_pending`` of each kind are kept, so memory stays bounded on any log or live stream. What never
pairs up is counted in :attr:`StampMatcher.dropped`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

NO_DETECTIONS = "image without detections"
NO_IMAGE = "detections without image"


@dataclass(frozen=True)
class Match:
    """An image and the detections of the same instant. ``stamp``: the image's header stamp in ns."""

    stamp: int
    image: Any
    detections: Any


class StampMatcher:
    """Pairs images and detections whose stamps differ by at most ``tolerance_ns``.

    Args:
        tolerance_ns: largest stamp difference of a pair, in nanoseconds.
        horizon_ns: how long (header time) an unpaired message waits before it is dropped.
        max_pending: most unpaired messages of each kind kept (the oldest is dropped beyond it).
    """

    def __init__(
        self, tolerance_ns: int = 10_000_000, horizon_ns: int = 2_000_000_000, max_pending: int = 64
    ) -> None:
        if tolerance_ns < 0 or horizon_ns < 0 or max_pending < 1:
            raise ValueError("tolerance and horizon must be >= 0 and max_pending >= 1")
        self.tolerance_ns, self.horizon_ns, self.max_pending = tolerance_ns, horizon_ns, max_pending
        self._images: dict[int, Any] = {}
        self._detections: dict[int, Any] = {}
        self._newest = -(2**63)
        self.dropped: Counter[str] = Counter()

    def add_image(self, stamp: int, image: Any) -> list[Match]:
        """Offer an image; returns the match it completes (or nothing yet)."""
        partner = self._take(self._detections, stamp)
        if partner is not None:
            return self._done(stamp, [Match(stamp, image, partner)])
        self._keep(self._images, stamp, image, NO_DETECTIONS)
        return self._done(stamp, [])

    def add_detections(self, stamp: int, detections: Any) -> list[Match]:
        """Offer a detection message; returns the match it completes (or nothing yet)."""
        found = self._nearest(self._images, stamp)
        if found is not None:
            return self._done(stamp, [Match(found, self._images.pop(found), detections)])
        self._keep(self._detections, stamp, detections, NO_IMAGE)
        return self._done(stamp, [])

    def finish(self) -> None:
        """End of stream: everything still waiting is dropped and counted."""
        self.dropped[NO_DETECTIONS] += len(self._images)
        self.dropped[NO_IMAGE] += len(self._detections)
        self._images.clear()
        self._detections.clear()

    def _nearest(self, pending: dict[int, Any], stamp: int) -> int | None:
        best = min(pending, key=lambda s: abs(s - stamp), default=None)
        return best if best is not None and abs(best - stamp) <= self.tolerance_ns else None

    def _take(self, pending: dict[int, Any], stamp: int) -> Any:
        found = self._nearest(pending, stamp)
        return None if found is None else pending.pop(found)

    def _keep(self, pending: dict[int, Any], stamp: int, item: Any, reason: str) -> None:
        if stamp in pending:
            self.dropped[f"{reason} (duplicate stamp)"] += 1
        pending[stamp] = item
        while len(pending) > self.max_pending:
            pending.pop(min(pending))
            self.dropped[reason] += 1

    def _done(self, stamp: int, matches: list[Match]) -> list[Match]:
        self._newest = max(self._newest, stamp)
        limit = self._newest - self.horizon_ns
        for pending, reason in ((self._images, NO_DETECTIONS), (self._detections, NO_IMAGE)):
            for old in [s for s in pending if s < limit]:
                del pending[old]
                self.dropped[reason] += 1
        return matches
