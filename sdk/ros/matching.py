"""Pairing camera images with the detector's output by header stamp, with bounded buffers.

A detector copies the image's header stamp into its output, usually exactly; ``tolerance`` allows for one
that restamps (default 10 ms: well under a frame at 30 fps). Messages wait for their partner at most
``horizon`` (default 2 s, measured in header time against the newest accepted stamp) and at most
``max_pending`` of each kind are kept, so memory stays bounded on any log or live stream. What never
pairs up is counted in :attr:`StampMatcher.dropped` with its reason.

**Stamp jumps.** One wrong header stamp must not move the stream's clock: a stamp more than ``horizon``
ahead of the newest accepted stamp is held, not accepted, until the messages after it decide:

- a message within ``horizon`` of the stream's time comes next: the held messages were outliers and are
  dropped, each counted as ``header stamp jumps N s ahead of the stream ...``;
- ``confirm`` (default 3) distinct stamps near the held time come first: time really jumped (a log
  recorded in two sessions, a clock set forward), the held messages are accepted in the order they came,
  and what still waited before the jump is dropped as unpaired;
- the log ends first: nothing contradicts the held messages, :meth:`StampMatcher.flush` accepts them.

The first messages of a stream are held the same way until ``confirm`` distinct stamps agree, so an
outlier cannot become the time base either. A stamp more than ``horizon`` behind the newest accepted one is
dropped at once (``header stamp N s behind the stream ...``): it came too late to pair, or its clock
jumped back (a stream that goes back in time is not followed; its frames would run backwards).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

NO_DETECTIONS = "image without detections"
NO_IMAGE = "detections without image"
IMAGE, DETECTIONS = "image", "detections"


@dataclass(frozen=True)
class Match:
    """An image and the detections of the same instant. ``stamp``: the image's header stamp in ns."""

    stamp: int
    image: Any
    detections: Any


@dataclass
class _Held:
    """Messages whose stamps agree with each other but not (yet) with the stream's time."""

    items: list[tuple[str, int, Any]] = field(default_factory=list)
    low: int = 0
    high: int = 0

    def add(self, kind: str, stamp: int, item: Any) -> None:
        self.low = stamp if not self.items else min(self.low, stamp)
        self.high = stamp if not self.items else max(self.high, stamp)
        self.items.append((kind, stamp, item))

    def near(self, stamp: int, horizon: int) -> bool:
        return self.low - horizon <= stamp <= self.high + horizon

    def distinct(self, tolerance: int) -> int:
        """Stamps more than ``tolerance`` apart (an image and its detections count once)."""
        count, last = 0, None
        for stamp in sorted(s for _, s, _ in self.items):
            if last is None or stamp - last > tolerance:
                count, last = count + 1, stamp
        return count


class StampMatcher:
    """Pairs images and detections whose stamps differ by at most ``tolerance_ns``.

    Args:
        tolerance_ns: largest stamp difference of a pair, in nanoseconds.
        horizon_ns: how long (header time) an unpaired message waits before it is dropped; also how far a
            stamp may be from the stream's time before it is held as a possible jump.
        max_pending: most unpaired messages of each kind kept (the oldest is dropped beyond it), and most
            messages held after a jump.
        confirm: distinct stamps that must agree before a jump (or the first time of a stream) is accepted.
    """

    def __init__(
        self,
        tolerance_ns: int = 10_000_000,
        horizon_ns: int = 2_000_000_000,
        max_pending: int = 64,
        confirm: int = 3,
    ) -> None:
        if tolerance_ns < 0 or horizon_ns < 0 or max_pending < 1 or confirm < 1:
            raise ValueError("tolerance and horizon must be >= 0, max_pending and confirm >= 1")
        self.tolerance_ns, self.horizon_ns, self.max_pending = tolerance_ns, horizon_ns, max_pending
        self.confirm = confirm
        self._images: dict[int, Any] = {}
        self._detections: dict[int, Any] = {}
        self._newest: int | None = None
        self._held: list[_Held] = []
        self.dropped: Counter[str] = Counter()

    def add_image(self, stamp: int, image: Any) -> list[Match]:
        """Offer an image; returns the matches it completes (or nothing yet)."""
        return self._offer(IMAGE, stamp, image)

    def add_detections(self, stamp: int, detections: Any) -> list[Match]:
        """Offer a detection message; returns the matches it completes (or nothing yet)."""
        return self._offer(DETECTIONS, stamp, detections)

    def flush(self) -> list[Match]:
        """End of stream: accept the held messages that most agree (nothing came to contradict them)."""
        if not self._held:
            return []
        best = max(self._held, key=lambda h: (h.distinct(self.tolerance_ns), len(h.items)))
        return self._take(best, "the stream around it agrees on another time")

    def finish(self) -> None:
        """End of stream: everything still waiting (or held) is dropped and counted."""
        for held in self._held:
            self._reject(held, "the stream ended before later messages confirmed it")
        self._held.clear()
        self.dropped[NO_DETECTIONS] += len(self._images)
        self.dropped[NO_IMAGE] += len(self._detections)
        self._images.clear()
        self._detections.clear()

    def _offer(self, kind: str, stamp: int, item: Any) -> list[Match]:
        newest, horizon = self._newest, self.horizon_ns
        if newest is not None and stamp < newest - horizon:
            self.dropped[f"header stamp {_seconds(newest - stamp)} behind the stream, beyond the "
                         f"{_seconds(horizon)} pairing horizon (late, or its clock jumped back)"] += 1  # fmt: skip
            return []
        if newest is not None and stamp <= newest + horizon:
            for held in self._held:
                self._reject(held, "the messages after it continue from the earlier time")
            self._held.clear()
            return self._accept(kind, stamp, item)
        group = next((h for h in self._held if h.near(stamp, horizon)), None)
        if group is None:
            group = _Held()
            self._held.append(group)
        group.add(kind, stamp, item)
        if sum(len(h.items) for h in self._held) > self.max_pending:
            self._reject(self._held.pop(0), "too many messages far from the stream's time")
        if group in self._held and (
            group.distinct(self.tolerance_ns) >= self.confirm or len(group.items) > self.max_pending // 2
        ):
            return self._take(group, "the stream continued from another time")
        return []

    def _take(self, group: _Held, why_others: str) -> list[Match]:
        """Accept ``group`` (time jumped to it); the other held groups were outliers."""
        others = [h for h in self._held if h is not group]
        self._held.clear()
        matches: list[Match] = []
        for kind, stamp, item in group.items:
            matches += self._accept(kind, stamp, item)
        for other in others:  # after the accepted time is known, so their reasons say how far off they were
            self._reject(other, why_others)
        return matches

    def _reject(self, group: _Held, why: str) -> None:
        for _, stamp, _ in group.items:
            if self._newest is None:  # the stream ended before any time was accepted
                self.dropped[f"header stamp never confirmed by other messages ({why})"] += 1
            elif stamp > self._newest:
                self.dropped[f"header stamp jumps {_seconds(stamp - self._newest)} ahead of the stream ({why})"] += 1
            else:
                self.dropped[f"header stamp {_seconds(self._newest - stamp)} behind the stream ({why})"] += 1

    def _accept(self, kind: str, stamp: int, item: Any) -> list[Match]:
        if kind == IMAGE:
            partner = self._take_nearest(self._detections, stamp)
            if partner is not None:
                return self._done(stamp, [Match(stamp, item, partner)])
            self._keep(self._images, stamp, item, NO_DETECTIONS)
            return self._done(stamp, [])
        found = self._nearest(self._images, stamp)
        if found is not None:
            return self._done(stamp, [Match(found, self._images.pop(found), item)])
        self._keep(self._detections, stamp, item, NO_IMAGE)
        return self._done(stamp, [])

    def _nearest(self, pending: dict[int, Any], stamp: int) -> int | None:
        best = min(pending, key=lambda s: abs(s - stamp), default=None)
        return best if best is not None and abs(best - stamp) <= self.tolerance_ns else None

    def _take_nearest(self, pending: dict[int, Any], stamp: int) -> Any:
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
        self._newest = stamp if self._newest is None else max(self._newest, stamp)
        limit = self._newest - self.horizon_ns
        for pending, reason in ((self._images, NO_DETECTIONS), (self._detections, NO_IMAGE)):
            for old in [s for s in pending if s < limit]:
                del pending[old]
                self.dropped[reason] += 1
        return matches


def _seconds(ns: int) -> str:
    """A stamp difference for a drop reason: whole seconds from 10 s on, so equal jumps count together."""
    s = ns / 1e9
    return f"{s:,.0f} s" if s >= 10 else f"{s:.1f} s"
