"""Run the producer of a stream one step ahead on a second thread: the detector of the next frame overlaps the
pipeline step of this one.

Decoding a frame and running a CNN detector on it (ONNX Runtime and OpenCV release the GIL while they work)
take about as long as the pipeline step that follows, so on a machine with two cores the two can run at once:
:func:`prefetched` moves the production of the items (reading the frame, detecting its people) to a worker
thread that stays at most ``depth`` items ahead (bounded memory: ``depth`` frames), while the caller steps the
pipeline. The order of the items is kept; an exception of the producer is raised in the caller at the item
where it happened; leaving the loop early (``break``, an exception, Ctrl-C) stops the worker.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def prefetched(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """``items``, produced on a worker thread at most ``depth`` (>= 1) items ahead of the caller."""
    if depth < 1:
        raise ValueError(f"prefetch depth: expected >= 1, got {depth}")
    slots: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(value: object) -> bool:
        while not stop.is_set():
            try:
                slots.put(value, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            put((_DONE, exc))
            return
        put((_DONE, None))

    worker = threading.Thread(target=work, name="pairedge-prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item, error = slots.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        worker.join(timeout=10.0)
