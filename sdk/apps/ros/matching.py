"""Pairing camera images with the detector's output by header stamp, with bounded buffers.

A detector copies the image's header stamp into its output, usually exactly; ``tolerance`` allows for one
that restamps (default 10 ms: well under a frame at 30 fps). Messages wait for their partner at most
``horizon`` (default 2 s, measured in header time against the newest accepted stamp) and at most
``max_pending`` of each kind are kept, so memory stays bounded on any log or live stream. What never
pairs up is counted in :attr:`StampMatcher.dropped` with its reason.

**Stamp jumps.** One wrong header stamp must not move the stream's clock. The stream's *reach* is
``max(horizon, 10 x its typical step)`` (the median of its last 16 steps between distinct stamps: 2 s for a
30 fps camera, 50 s for one frame every 5 s). A stamp more than the reach ahead of the newest accepted
stamp is held, not accepted, until the messages after it decide:

- a message within the reach of the stream's time comes next: the held messages were outliers and are
  dropped, each counted as ``header stamp jumps N s ahead of the stream ...``;
- ``confirm`` (default 3) distinct stamps within the reach of the held time come first: time really jumped
  (a log recorded in two sessions, a clock set forward), the held messages are accepted in the order they
  came, and what still waited before the jump is dropped as unpaired;
- the log ends first: nothing contradicts them, :meth:`StampMatcher.flush` accepts them.

The first messages of a stream are held until ``confirm`` distinct stamps have come; a first or last one
of them whose step to the others is more than ``max(horizon, 10 x`` the others' step) is an outlier and is
dropped, so an outlier cannot become the time base either. A stamp more than the reach behind the newest
accepted one is dropped at once (``header stamp N s behind the stream ...``): it came far too late, or its
clock jumped back (a stream that goes back in time is not followed; its frames would run backwards).
"""

from __future__ import annotations

import statistics
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

NO_DETECTIONS = "image without detections"
NO_IMAGE = "detections without image"
IMAGE, DETECTIONS = "image", "detections"


#: Most distinct drop reasons kept; further new reasons are counted together under :data:`OTHER_REASONS`.
MAX_REASONS = 100
OTHER_REASONS = f"other reasons (more than {MAX_REASONS} kinds; the first {MAX_REASONS - 1} are listed)"


class DropCounts(Counter):  # type: ignore[type-arg]
    """Drop reason -> count, with at most :data:`MAX_REASONS` distinct reasons.

    Reasons carry what was wrong (sizes, encodings), so a hostile stream could invent a new one per message;
    past the cap new reasons add to :data:`OTHER_REASONS` and memory stays flat.
    """

    def __setitem__(self, key: str, value: int) -> None:
        if key not in self and key != OTHER_REASONS and len(self) >= MAX_REASONS - 1:
            key, value = OTHER_REASONS, self.get(OTHER_REASONS, 0) + value  # value is the increment here
        super().__setitem__(key, value)

    def update(self, other: Any = (), /, **more: int) -> None:  # type: ignore[override]
        """Add counts (a mapping or an iterable of reasons) item by item, through the cap."""
        items = other.items() if hasattr(other, "items") else Counter(other).items()
        for key, n in [*items, *more.items()]:
            self[key] += n


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

    def near(self, stamp: int, reach: int) -> bool:
        return self.low - reach <= stamp <= self.high + reach

    def stamps(self, tolerance: int) -> list[int]:
        """The distinct stamps, sorted: stamps within ``tolerance`` of the previous one count once (an image
        and its detections)."""
        out: list[int] = []
        for stamp in sorted(s for _, s, _ in self.items):
            if not out or stamp - out[-1] > tolerance:
                out.append(stamp)
        return out


class StampMatcher:
    """Pairs images and detections whose stamps differ by at most ``tolerance_ns``.

    Args:
        tolerance_ns: largest stamp difference of a pair, in nanoseconds.
        horizon_ns: how long (header time) an unpaired message waits before it is dropped; also the least
            reach of the stream (see the module docstring).
        max_pending: most unpaired messages of each kind kept (the oldest is dropped beyond it), and most
            messages held after a jump or at the start.
        confirm: distinct stamps that must agree before a jump (or the start of a stream) is accepted.
    """

    #: The reach is this many typical steps of the stream (at least the horizon).
    REACH_STEPS = 10
    #: Steps between distinct accepted stamps kept for the typical step.
    STEPS_KEPT = 16

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
        self._start: _Held | None = _Held()  # the first messages, until the stream's time is settled
        self._held: _Held | None = None  # messages after a possible jump
        self._steps: deque[int] = deque(maxlen=self.STEPS_KEPT)
        self.dropped: Counter[str] = DropCounts()

    def add_image(self, stamp: int, image: Any) -> list[Match]:
        """Offer an image; returns the matches it completes (or nothing yet)."""
        return self._offer(IMAGE, stamp, image)

    def add_detections(self, stamp: int, detections: Any) -> list[Match]:
        """Offer a detection message; returns the matches it completes (or nothing yet)."""
        return self._offer(DETECTIONS, stamp, detections)

    def flush(self) -> list[Match]:
        """End of stream: accept the messages still held (nothing came to contradict them)."""
        if self._start is not None:
            return self._settle()
        held, self._held = self._held, None
        return self._replay(held) if held is not None else []

    def finish(self) -> None:
        """End of stream: everything still waiting (or held) is dropped and counted."""
        for held in (self._start, self._held):
            if held is not None:
                self._reject(held.items, "the stream ended before later messages confirmed it")
        self._start = _Held() if self._newest is None else None
        self._held = None
        self.dropped[NO_DETECTIONS] += len(self._images)
        self.dropped[NO_IMAGE] += len(self._detections)
        self._images.clear()
        self._detections.clear()

    def reach(self) -> int:
        """How far (ns) a stamp may be from the newest accepted one and still be taken as the stream's."""
        if not self._steps:
            return self.horizon_ns
        return max(self.horizon_ns, self.REACH_STEPS * int(statistics.median(self._steps)))

    def _offer(self, kind: str, stamp: int, item: Any) -> list[Match]:
        if self._start is not None:
            self._start.add(kind, stamp, item)
            enough = len(self._start.stamps(self.tolerance_ns)) >= self.confirm
            return self._settle() if enough or len(self._start.items) > self.max_pending // 2 else []
        assert self._newest is not None
        newest, reach = self._newest, self.reach()
        if stamp < newest - reach:
            self.dropped[
                f"header stamp {_seconds(newest - stamp)} behind the stream, more than its reach of "
                f"{_seconds(reach)} (late, or its clock jumped back)"
            ] += 1
            return []
        if stamp <= newest + reach:
            if self._held is not None:
                self._reject(self._held.items, "the messages after it continue from the earlier time")
                self._held = None
            if stamp - newest > self.tolerance_ns:
                self._steps.append(stamp - newest)
            return self._accept(kind, stamp, item)
        if self._held is not None and not self._held.near(stamp, reach):
            self._reject(self._held.items, "the messages after it did not continue from its time")
            self._held = None
        if self._held is None:
            self._held = _Held()
        self._held.add(kind, stamp, item)
        held = self._held
        if len(held.stamps(self.tolerance_ns)) >= self.confirm or len(held.items) > self.max_pending // 2:
            self._held = None
            return self._replay(held)
        return []

    def _settle(self) -> list[Match]:
        """The start of the stream: drop an outlying first or last stamp, accept the rest in arrival order."""
        start, self._start = self._start, None
        assert start is not None
        stamps = start.stamps(self.tolerance_ns)
        out = self._outliers(stamps)
        kept = [s for s in stamps if s not in out]
        self._steps.extend(b - a for a, b in zip(kept, kept[1:], strict=False))
        bad = [x for x in start.items if any(abs(x[1] - o) <= self.tolerance_ns for o in out)]
        good = _Held()
        for x in start.items:
            if not any(x is b for b in bad):
                good.add(*x)
        matches = self._replay(good)
        self._reject(bad, "the stream's first stamps agree on another time")
        return matches

    def _outliers(self, stamps: list[int]) -> set[int]:
        """Of sorted distinct stamps, the first / last ones whose step to the rest is out of proportion."""
        out: set[int] = set()
        s = list(stamps)
        while len(s) >= 3:
            steps = [b - a for a, b in zip(s, s[1:], strict=False)]
            if steps[-1] > self._limit(steps[:-1]):
                out.add(s.pop())
            elif steps[0] > self._limit(steps[1:]):
                out.add(s.pop(0))
            else:
                break
        return out

    def _limit(self, steps: list[int]) -> int:
        return max(self.horizon_ns, self.REACH_STEPS * int(statistics.median(steps)))

    def _replay(self, held: _Held) -> list[Match]:
        """Accept held messages in the order they came (time moves to theirs)."""
        matches: list[Match] = []
        for kind, stamp, item in held.items:
            matches += self._accept(kind, stamp, item)
        return matches

    def _reject(self, items: list[tuple[str, int, Any]], why: str) -> None:
        for _, stamp, _ in items:
            if self._newest is None:  # the stream ended before any time was accepted
                self.dropped[f"header stamp never confirmed by other messages ({why})"] += 1
            elif stamp > self._newest:
                self.dropped[
                    f"header stamp jumps {_seconds(stamp - self._newest)} ahead of the stream ({why})"
                ] += 1
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
