"""The live node without rclpy: stamp pairing in the callbacks, decoding and inference on one worker thread.

Message flow (the node in :mod:`pairedge.apps.ros.node` only adds rclpy around this):

1. A subscription callback hands a message to :meth:`NodeCore.on_image` / :meth:`NodeCore.on_detections`.
   They read the header stamp and pair images with detections by stamp
   (:class:`~pairedge.apps.ros.matching.StampMatcher`, its queues bounded by ``pairing_queue``), then put the
   newest pair into a one-slot buffer (:class:`~pairedge.apps.ros.worker.LatestSlot`). Nothing else: no
   decoding, no inference. With a ``detector`` there is no detections topic: each image is a "pair" alone.
2. The worker thread takes the newest pair, decodes it (:class:`~pairedge.apps.ros.runner.FrameDecoder`: image
   conversion, boxes, class filter, stamp order), runs the detector when there is one, steps the pipeline
   (:meth:`~pairedge.apps.ros.runner.RosRunner.step`, the bag path's step) and calls ``publish``.
3. Every drop is counted with its reason: pairing (unpaired, stamp jumps), decoding, a pair replaced in the
   slot before the worker took it, a failed step. :meth:`NodeCore.report` gives the periodic diagnostics and
   :meth:`NodeCore.shutdown` joins the thread and returns the summary.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from pairedge.apps.ros.matching import DropCounts, Match, StampMatcher
from pairedge.apps.ros.node_params import NodeConfig
from pairedge.apps.ros.runner import Frame, FrameDecoder, Output, RosRunner, header_stamp
from pairedge.apps.ros.worker import LatestSlot, Worker
from pairedge.core.errors import InputError
from pairedge.core.io.textio import printable

#: Drop reason of a pair the worker had not taken when a newer one came (latest-frame policy).
REPLACED = "frame replaced before the worker took it (latest-frame policy)"
#: Drop reason of a pair still waiting in the slot when the node shut down.
AT_SHUTDOWN = "frame still waiting when the node shut down"
#: Stands in for a detection message when the node runs its own detector (no boxes; the detector's come
#: later).
NO_BOXES = SimpleNamespace(detections=())


class _Decoder(FrameDecoder):
    """The decoding half of :class:`FrameDecoder`, for pairs made elsewhere (the callbacks' matcher)."""

    def decode(self, matches: list[Match]) -> list[Frame]:
        """Decode paired messages into frames (drops counted in :attr:`dropped`)."""
        return self._decode(matches)


class Pairing:
    """The callbacks' half: header stamps read and messages paired, under one lock.

    Args:
        tolerance_s: largest stamp difference of a pair, seconds. max_pending: the matcher's queue bound.
        alone: True when images need no partner (the node runs its own detector).
    """

    def __init__(self, tolerance_s: float, max_pending: int, alone: bool) -> None:
        self.matcher = StampMatcher(tolerance_ns=int(round(tolerance_s * 1e9)), max_pending=max_pending)
        self.alone = alone
        self.dropped: Counter[str] = DropCounts()
        self.images = 0
        self.lock = threading.Lock()

    def image(self, msg: Any) -> list[Match]:
        """An image message: the pairs it completes (each image keeps its 0-based arrival index)."""
        with self.lock:
            index, self.images = self.images, self.images + 1
            stamp = self._stamp(msg, "image")
            if stamp is None:
                return []
            if self.alone:
                return [Match(stamp, (index, msg), NO_BOXES)]
            return self.matcher.add_image(stamp, (index, msg))

    def detections(self, msg: Any) -> list[Match]:
        """A detection message: the pairs it completes."""
        with self.lock:
            stamp = self._stamp(msg, "detections")
            return [] if stamp is None else self.matcher.add_detections(stamp, msg)

    def counts(self, final: bool = False) -> Counter[str]:
        """Drops so far (``final``: end of stream, what still waits for a partner is dropped too)."""
        with self.lock:
            if final:
                self.matcher.finish()
            return _merge(self.matcher.dropped, self.dropped)

    def _stamp(self, msg: Any, what: str) -> int | None:
        return header_stamp(msg, what, self.dropped)


@dataclass(frozen=True)
class Report:
    """One diagnostics report. level: 0 OK, 1 WARN (new drops since the last report), 2 ERROR (the worker
    thread is gone). values: key -> value, drop reasons as ``dropped: <reason>``."""

    level: int
    message: str
    values: dict[str, object]


class NodeCore:
    """Pairing, the worker thread, drops and reports of the live node.

    Args:
        config: the checked parameters.
        pipe: a loaded pipeline (:meth:`Deployment.load`); the core closes it at shutdown.
        publish: called on the worker thread with each frame's :class:`~pairedge.apps.ros.runner.Output`.
        detector: an activated person detector when ``config.detector`` is set (deactivated at shutdown).
        log: called with one line for warnings (a failed step).
    """

    def __init__(
        self,
        config: NodeConfig,
        pipe: Any,
        publish: Callable[[Output], None],
        detector: Any | None = None,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        if config.uses_detector != (detector is not None):
            raise InputError("a detector is given exactly when the detector parameter is set")
        self.config, self.pipe, self.publish, self.detector, self.log = config, pipe, publish, detector, log
        self.pairing = Pairing(config.stamp_tolerance, config.pairing_queue, alone=detector is not None)
        self.decoder = _Decoder(tolerance_s=config.stamp_tolerance, classes=config.class_set())
        self.runner = RosRunner(pipe, None, tolerance_s=config.stamp_tolerance, messages=False)
        self.slot: LatestSlot[Match] = LatestSlot()
        self.worker = Worker(self.slot, self._process, self._failed)
        self._lock = threading.Lock()  # the worker's counters, read by the diagnostics timer
        self._failures: Counter[str] = DropCounts()
        self._frames = self._period_frames = 0
        self._period_ms = 0.0
        self._last_drops = 0
        self._closed = False
        self.worker.start()

    # --- callbacks (executor threads): pair and enqueue only ---

    def on_image(self, msg: Any) -> None:
        """Image callback: pair by stamp, put the newest pair in the slot."""
        self.slot.put_all(self.pairing.image(msg))

    def on_detections(self, msg: Any) -> None:
        """Detections callback: pair by stamp, put the newest pair in the slot (a callback that completes
        several, as at the start of a stream, keeps only the newest)."""
        self.slot.put_all(self.pairing.detections(msg))

    # --- the worker thread ---

    def _process(self, match: Match) -> None:
        start = time.perf_counter()
        with self._lock:
            frames = self.decoder.decode([match])
        for frame in frames:
            if self.detector is not None:
                frame = dataclasses.replace(frame, detections=self.detector.detect(frame.image))
            out = self.runner.step(frame)
            self.publish(out)
            with self._lock:
                self._frames += 1
                self._period_frames += 1
                self._period_ms += (time.perf_counter() - start) * 1000.0
            start = time.perf_counter()

    def _failed(self, exc: BaseException) -> None:
        reason = f"pipeline step failed ({type(exc).__name__})"
        with self._lock:
            first = reason not in self._failures
            self._failures[reason] += 1
        if first:  # once per kind: a broken stream must not flood the log
            self.log(f"{reason}: {printable(str(exc), 200)}")

    # --- reports ---

    @property
    def frames(self) -> int:
        """Frames stepped and published so far."""
        with self._lock:
            return self._frames

    def drops(self, final: bool = False) -> Counter[str]:
        """Every drop reason with its count, from pairing, the slot, decoding and failed steps."""
        pairing = self.pairing.counts(final)
        with self._lock:
            merged = _merge(pairing, self.decoder.dropped, self._failures)
        for reason, n in ((REPLACED, self.slot.replaced), (AT_SHUTDOWN, self.slot.discarded)):
            if n:
                merged[reason] += n
        return merged

    def report(self) -> Report:
        """The diagnostics of the period since the last report (frames, mean time per frame, drops)."""
        drops = self.drops()
        total = sum(drops.values())
        with self._lock:
            frames, ms = self._period_frames, self._period_ms
            self._period_frames, self._period_ms = 0, 0.0
            new, self._last_drops = total - self._last_drops, total
            done = self._frames
        alive = self.worker.thread.is_alive()
        level = 2 if not alive and not self._closed else (1 if new > 0 else 0)
        message = (
            "inference thread stopped"
            if level == 2
            else f"{frames} frames in the period, {new} new drops"
            if new
            else f"{frames} frames in the period"
        )
        values: dict[str, object] = {
            "frames": done,
            "frames in period": frames,
            "dropped": total,
            "mean ms per frame (period)": f"{ms / frames:.2f}" if frames else "n/a",
            "input pairs offered": self.slot.offered,
        }
        values.update({f"dropped: {reason}": n for reason, n in sorted(drops.items())})
        return Report(level, message, values)

    def shutdown(self, timeout: float = 10.0) -> tuple[bool, Counter[str]]:
        """Stop the worker (the frame in hand is finished), count what still waits, close the pipeline and
        the detector. Returns (the thread was joined in time, every drop reason with its count)."""
        if self._closed:
            return True, self.drops()
        joined = self.worker.stop(timeout)
        self._closed = True
        drops = self.drops(final=True)
        if (
            joined
        ):  # a thread still inside a step keeps its pipeline; closing it under the thread would crash it
            self.pipe.close()
            if self.detector is not None:
                self.detector.deactivate()
        return joined, drops


def _merge(*counts: Counter[str]) -> Counter[str]:
    merged: Counter[str] = DropCounts()
    for c in counts:
        for reason, n in c.items():
            if n > 0:
                merged[reason] += n
    return merged
