"""The one-slot buffer and the worker thread of the live node (pairedge.apps.ros.worker)."""

from __future__ import annotations

import threading

from pairedge.apps.ros.worker import LatestSlot, Worker


def test_slot_keeps_the_newest_item_and_counts_replacements() -> None:
    slot: LatestSlot[int] = LatestSlot()
    for k in range(5):
        assert slot.put(k)
    assert slot.take(0) == (True, 4)
    assert (slot.offered, slot.replaced) == (5, 4)
    assert slot.take(0.01) == (False, None)  # empty: times out
    slot.put(9)
    slot.close()
    assert slot.discarded == 1 and slot.take(0) == (False, None)
    assert slot.put(10) is False and slot.offered == 6


def test_put_all_keeps_the_last_item_only() -> None:
    slot: LatestSlot[int] = LatestSlot()
    assert slot.put_all([]) and slot.offered == 0
    slot.put_all([1, 2, 3])
    assert (slot.offered, slot.replaced) == (3, 2)
    slot.put_all([4, 5])  # 3 was still waiting
    assert (slot.offered, slot.replaced) == (5, 4) and slot.take(0) == (True, 5)


def test_worker_runs_items_on_its_thread_survives_errors_and_joins() -> None:
    slot: LatestSlot[int] = LatestSlot()
    seen: list[tuple[int, str]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def process(item: int) -> None:
        if item == 1:
            raise RuntimeError("bad frame")
        seen.append((item, threading.current_thread().name))
        if item == 2:
            done.set()

    worker = Worker(slot, process, errors.append, name="test-worker").start()
    for k in range(3):
        slot.put(k)
        if k < 2:  # let the worker take it before the next one comes
            while slot.offered != worker.processed + slot.replaced:
                threading.Event().wait(0.001)
    assert done.wait(10)
    assert worker.stop(5) and not worker.thread.is_alive()
    assert [i for i, _ in seen] == [0, 2] and {n for _, n in seen} == {"test-worker"}
    assert [str(e) for e in errors] == ["bad frame"] and worker.processed == 3


def test_stop_finishes_the_item_in_hand() -> None:
    slot: LatestSlot[str] = LatestSlot()
    entered, release, finished = threading.Event(), threading.Event(), []

    def process(item: str) -> None:
        entered.set()
        release.wait(10)
        finished.append(item)

    worker = Worker(slot, process, lambda exc: None).start()
    slot.put("first")
    assert entered.wait(10)
    slot.put("second")  # waits in the slot; discarded at stop
    threading.Timer(0.05, release.set).start()
    assert worker.stop(10)
    assert finished == ["first"] and slot.discarded == 1


def test_stop_reports_a_thread_that_does_not_finish() -> None:
    slot: LatestSlot[int] = LatestSlot()
    entered, release = threading.Event(), threading.Event()

    def process(item: int) -> None:
        entered.set()
        release.wait(10)

    worker = Worker(slot, process, lambda exc: None).start()
    slot.put(1)
    assert entered.wait(10)
    assert worker.stop(0.05) is False
    release.set()
    worker.thread.join(10)
    assert not worker.thread.is_alive()
