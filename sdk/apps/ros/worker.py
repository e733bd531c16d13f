"""The node's inference thread and the one-slot buffer that feeds it (latest-frame policy).

Subscription callbacks must return at once: a callback that runs the pipeline stalls the executor, and the
middleware then drops or queues messages it cannot hand over. The node's callbacks only pair stamps and
:meth:`LatestSlot.put` the pair; :class:`Worker` takes the newest pair and runs it. A pair that is replaced
before the worker took it is counted in :attr:`LatestSlot.replaced` (a robot wants the newest frame, not a
backlog growing behind a slow step).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LatestSlot(Generic[T]):
    """A bounded one-item buffer between producer threads and one consumer.

    Attributes:
        offered: items put. replaced: items overwritten before they were taken.
        discarded: an item still waiting when the slot was closed (0 or 1).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: T | None = None
        self._full = False
        self._closed = False
        self.offered = self.replaced = self.discarded = 0

    def put(self, item: T) -> bool:
        """Offer ``item``, replacing one not yet taken; False (and nothing kept) once closed."""
        return self.put_all([item])

    def put_all(self, items: list[T]) -> bool:
        """Offer several items at once (oldest first): only the last is kept, the others count as replaced,
        as they would be had they come one by one faster than the consumer. False once closed."""
        if not items:
            return True
        with self._cond:
            if self._closed:
                return False
            self.offered += len(items)
            self.replaced += len(items) - 1 + (1 if self._full else 0)
            self._item, self._full = items[-1], True
            self._cond.notify()
            return True

    def take(self, timeout: float | None = None) -> tuple[bool, T | None]:
        """Wait for an item: ``(True, item)``, or ``(False, None)`` once closed (or after ``timeout`` s)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._full or self._closed, timeout):
                return False, None
            if self._closed:
                return False, None
            item, self._item, self._full = self._item, None, False
            return True, item

    def close(self) -> None:
        """No more items; a waiting item is discarded (counted) and the consumer wakes up."""
        with self._cond:
            if not self._closed and self._full:
                self.discarded += 1
            self._closed, self._item, self._full = True, None, False
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed


class Worker(Generic[T]):
    """One thread that runs ``process`` on every item taken from ``slot`` until the slot is closed.

    An exception from ``process`` is handed to ``on_error`` and the thread goes on with the next item (one
    bad frame costs that frame).

    Args:
        slot: where items come from. process: what to do with each (runs on this thread only).
        on_error: called with the exception of a failed ``process``. name: the thread's name.
    """

    def __init__(
        self,
        slot: LatestSlot[T],
        process: Callable[[T], None],
        on_error: Callable[[BaseException], None],
        name: str = "pairedge-inference",
    ) -> None:
        self.slot, self.process, self.on_error = slot, process, on_error
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.processed = 0

    def start(self) -> Worker[T]:
        """Start the thread; returns self."""
        self.thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> bool:
        """Close the slot and join the thread (the item in hand is finished); True when it ended in time."""
        self.slot.close()
        if self.thread.is_alive() or self.thread.ident is not None:
            self.thread.join(timeout)
        return not self.thread.is_alive()

    def _run(self) -> None:
        while True:
            ok, item = self.slot.take()
            if not ok:
                return
            try:
                self.process(item)  # type: ignore[arg-type]
            except Exception as exc:  # this item only; the thread serves the next one
                self.on_error(exc)
            self.processed += 1
