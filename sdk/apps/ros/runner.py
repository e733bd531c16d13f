"""The ROS-free core of pairedge on ROS 2: messages in, results and markers out.

:class:`RosRunner` takes decoded ``sensor_msgs/Image`` (or ``CompressedImage``) and
``vision_msgs/Detection2DArray`` messages in any order, pairs them by header stamp
(:class:`~pairedge.apps.ros.matching.StampMatcher`), steps the pipeline on each pair in stamp order and
returns what to publish: a ``std_msgs/String`` with the runtime's JSON record and a
``visualization_msgs/MarkerArray``. :class:`FrameDecoder` is the pairing and decoding half alone (what
``pairedge eval`` uses to read a log). The bag path (:mod:`pairedge.apps.ros.bag`) and the live node
(:mod:`pairedge.apps.ros.node`) are thin shells around them, so the tests of one cover the other.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from pairedge.apps.ros.matching import MAX_REASONS, OTHER_REASONS, DropCounts, Match, StampMatcher
from pairedge.core.errors import InputError
from pairedge.core.io.ros.messages import (
    TrackIds,
    detections_from_msg,
    image_to_bgr,
    result_to_markers,
    result_to_string,
    stamp_ns,
)
from pairedge.core.io.textio import printable
from pairedge.core.palette import label_colours
from pairedge.core.types import Detections

__all__ = ["MAX_REASONS", "OTHER_REASONS", "DropCounts", "Frame", "FrameDecoder", "Output", "RosRunner"]


@dataclass(frozen=True)
class Output:
    """What one matched frame produced.

    Attributes:
        stamp: the image's header stamp, nanoseconds. frame_id: the image's frame.
        image: (H, W, 3) uint8 BGR, as decoded. result: the pipeline's FrameResult.
        record: the JSON record (``results.jsonl`` schema). string, markers: the messages to publish (None
            when the runner was made with ``messages=False``).
    """

    stamp: int
    frame_id: str
    image: np.ndarray
    result: Any
    record: dict[str, Any]
    string: Any
    markers: Any


@dataclass(frozen=True)
class Frame:
    """A decoded, paired frame.

    Attributes:
        stamp: the image's header stamp, integer ns. frame_id: the image's frame.
        image: (H, W, 3) uint8 BGR. detections: its boxes.
        time_s: seconds since the first frame of the stream, ``(stamp - first stamp) / 1e9`` from integer
            nanoseconds: an exact duration whatever the stamps' origin (epoch stamps are ~1.7e9 s, where a
            float64 second keeps only ~0.2 us).
        index: the image's 0-based position among the image messages offered (dropped ones included), so
            a dropped frame leaves a gap instead of shifting the frames after it against a gold file.
    """

    stamp: int
    frame_id: str
    image: np.ndarray
    detections: Detections
    time_s: float = 0.0
    index: int = 0


class FrameDecoder:
    """Pairs image and detection messages by stamp and decodes each pair into a :class:`Frame`.

    Frames come out in increasing stamp order (an older pair arriving late is dropped and counted), and
    messages that cannot be decoded are dropped with their reason, so a consumer sees a clean stream: one
    bad message (a wrong header stamp, an image OpenCV cannot convert, a box beyond float32) costs that
    message or that box, never the stream. Stamp jumps follow :mod:`pairedge.apps.ros.matching`.

    Args:
        tolerance_s: largest image / detections stamp difference of a pair, seconds.
        classes: detection class ids to keep (None: all).
    """

    def __init__(self, *, tolerance_s: float = 0.01, classes: frozenset[str] | None = None) -> None:
        if not (np.isfinite(tolerance_s) and tolerance_s >= 0):
            raise InputError(f"stamp tolerance: expected a finite number of seconds >= 0, got {tolerance_s}")
        self.classes = classes
        self.matcher = StampMatcher(tolerance_ns=int(round(tolerance_s * 1e9)))
        self.dropped: Counter[str] = DropCounts()
        self._ids = TrackIds()
        self._last = -(2**63)
        self._first: int | None = None
        self._images = 0

    def image(self, msg: Any) -> list[Frame]:
        """Offer an image message; returns the frames it completes."""
        index, self._images = self._images, self._images + 1
        stamp = self._stamp(msg, "image")
        return [] if stamp is None else self._decode(self.matcher.add_image(stamp, (index, msg)))

    def skip_image(self, reason: str) -> None:
        """Count an image message that could not even be read (it still takes its place in
        :attr:`Frame.index`)."""
        self._images += 1
        self.dropped[reason] += 1

    def detections(self, msg: Any) -> list[Frame]:
        """Offer a detection message; returns the frames it completes."""
        stamp = self._stamp(msg, "detections")
        return [] if stamp is None else self._decode(self.matcher.add_detections(stamp, msg))

    def flush(self) -> list[Frame]:
        """End of stream: the frames of messages still held after a stamp jump (nothing contradicted them)."""
        return self._decode(self.matcher.flush())

    def finish(self) -> Counter[str]:
        """End of stream; returns every drop reason with its count."""
        self.matcher.finish()
        merged = DropCounts()
        for counts in (self.matcher.dropped, self.dropped):
            for reason, n in counts.items():
                if n > 0:
                    merged[reason] += n  # item by item: through the cap
        return merged

    def _stamp(self, msg: Any, what: str) -> int | None:
        return header_stamp(msg, what, self.dropped)

    def _decode(self, matches: list[Match]) -> list[Frame]:
        frames = []
        for match in matches:
            if match.stamp <= self._last:
                self.dropped["frame older than the previous one"] += 1
                continue
            index, msg = match.image
            try:
                image = image_to_bgr(msg)
                dets, skipped = detections_from_msg(match.detections, self._ids, self.classes)
                frame_id = printable(msg.header.frame_id)
            except InputError as exc:
                self.dropped[str(exc)] += 1
                continue
            except cv2.error as exc:
                self.dropped[
                    f"image conversion failed in OpenCV ({printable(exc.err or type(exc).__name__, 80)})"
                ] += 1
                continue
            except Exception as exc:  # garbage field types and values: this frame only, the stream goes on
                self.dropped[f"malformed message ({type(exc).__name__})"] += 1
                continue
            self.dropped.update(skipped)
            self._last = match.stamp
            if self._first is None:
                self._first = match.stamp
            frames.append(Frame(match.stamp, frame_id, image, dets, (match.stamp - self._first) / 1e9, index))
        return frames


class RosRunner:
    """Pairs messages, runs the pipeline and builds the output messages.

    Args:
        pipe: a loaded :class:`~pairedge.runtime.Pipeline`.
        store: the rosbags type store used to build output messages
            (:func:`~pairedge.core.io.ros.msgdefs.make_typestore`).
        tolerance_s, classes: see :class:`FrameDecoder`.
        colours: BGR colour per label id for the markers (default: :mod:`pairedge.core.palette`, as in the
            video).
        messages: build the String and MarkerArray of every frame (False: a bag run without ``--out-bag``,
            where nothing would publish them).
    """

    def __init__(
        self,
        pipe: Any,
        store: Any,
        *,
        tolerance_s: float = 0.01,
        classes: frozenset[str] | None = None,
        colours: tuple[tuple[int, int, int], ...] | None = None,
        messages: bool = True,
    ) -> None:

        self.pipe, self.store = pipe, store
        self.decoder = FrameDecoder(tolerance_s=tolerance_s, classes=classes)
        self.colours = colours or label_colours(pipe.labels)  # the annotated video's colours, by label name
        self.messages = messages
        self.frames = 0

    def image(self, msg: Any) -> list[Output]:
        """Offer an image message."""
        return [self.step(f) for f in self.decoder.image(msg)]

    def detections(self, msg: Any) -> list[Output]:
        """Offer a detection message."""
        return [self.step(f) for f in self.decoder.detections(msg)]

    def flush(self) -> list[Output]:
        """End of stream: run the frames still held after a stamp jump (see :meth:`FrameDecoder.flush`)."""
        return [self.step(f) for f in self.decoder.flush()]

    def finish(self) -> Counter[str]:
        """End of stream; returns every drop reason with its count."""
        return self.decoder.finish()

    def step(self, frame: Frame) -> Output:
        """Run the pipeline on one decoded frame and build the messages to publish.

        The pipeline's timestamp is :attr:`Frame.time_s` (an exact duration since the first frame) and its
        frame index :attr:`Frame.index` (the image's position in the stream); the record keeps the header
        stamp as ``stamp_ns``.
        """
        result = self.pipe.step(frame.image, frame.detections, frame.time_s, frame_index=frame.index)
        self.frames += 1
        record = result.to_json_dict()
        record["stamp_ns"] = frame.stamp
        string = markers = None
        if self.messages:
            string = result_to_string(self.store, record)
            markers = result_to_markers(self.store, result, frame.stamp, frame.frame_id, self.colours)
        return Output(frame.stamp, frame.frame_id, frame.image, result, record, string, markers)


def header_stamp(msg: Any, what: str, dropped: Any) -> int | None:
    """``msg.header``'s stamp in ns, or None with the reason counted in ``dropped[...]`` (a garbage header
    costs only its own message); ``what`` is "image" or "detections". Shared by the bag runner and the live
    node."""
    try:
        return stamp_ns(msg.header)
    except Exception as exc:  # a garbage header: this message only
        reason = str(exc) if isinstance(exc, InputError) else f"no valid header stamp ({type(exc).__name__})"
        dropped[f"{what} message: {reason}"] += 1
        return None
