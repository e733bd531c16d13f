"""The ROS-free core of pairedge on ROS 2: messages in, results and markers out.

:class:`RosRunner` takes decoded ``sensor_msgs/Image`` (or ``CompressedImage``) and
``vision_msgs/Detection2DArray`` messages in any order, pairs them by header stamp
(:class:`~pairedge.ros.matching.StampMatcher`), steps the pipeline on each pair in stamp order and returns
what to publish: a ``std_msgs/String`` with the runtime's JSON record and a ``visualization_msgs/MarkerArray``.
The bag path (:mod:`pairedge.ros.bag`) and the live node (:mod:`pairedge.ros.node`) are thin shells
around it, so the tests of one cover the other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pairedge.errors import InputError
from pairedge.ros.matching import Match, StampMatcher
from pairedge.ros.messages import (
    TrackIds,
    detections_from_msg,
    image_to_bgr,
    result_to_markers,
    result_to_string,
    stamp_ns,
)


@dataclass(frozen=True)
class Output:
    """What one matched frame produced.

    Attributes:
        stamp: the image's header stamp, nanoseconds. frame_id: the image's frame.
        image: (H, W, 3) uint8 BGR, as decoded. result: the pipeline's FrameResult.
        record: the JSON record (``results.jsonl`` schema). string, markers: the messages to publish.
    """

    stamp: int
    frame_id: str
    image: np.ndarray
    result: Any
    record: dict[str, Any]
    string: Any
    markers: Any


class RosRunner:
    """Pairs messages, runs the pipeline and builds the output messages.

    Args:
        pipe: a loaded :class:`~pairedge.runtime.Pipeline`.
        store: the rosbags type store used to build output messages (:func:`~pairedge.ros.msgdefs.make_typestore`).
        tolerance_s: largest image / detections stamp difference of a pair, seconds.
        classes: detection class ids to keep (None: all).
        colours: BGR colour per label id for the markers.
    """

    def __init__(
        self,
        pipe: Any,
        store: Any,
        *,
        tolerance_s: float = 0.01,
        classes: frozenset[str] | None = None,
        colours: tuple[tuple[int, int, int], ...] | None = None,
        on_result: Callable[[Output], None] | None = None,
    ) -> None:
        from pairedge.runtime.output import LABEL_COLOURS

        if not (np.isfinite(tolerance_s) and tolerance_s >= 0):
            raise InputError(f"stamp tolerance: expected a finite number of seconds >= 0, got {tolerance_s}")
        self.pipe, self.store, self.classes = pipe, store, classes
        self.colours = colours or LABEL_COLOURS
        self.matcher = StampMatcher(tolerance_ns=int(round(tolerance_s * 1e9)))
        self.dropped: Counter[str] = Counter()
        self.frames = 0
        self._ids = TrackIds()
        self._last = -(2**63)
        self._on_result = on_result

    def image(self, msg: Any) -> list[Output]:
        """Offer an image message."""
        return self._run(self.matcher.add_image(stamp_ns(msg.header), msg))

    def detections(self, msg: Any) -> list[Output]:
        """Offer a detection message."""
        return self._run(self.matcher.add_detections(stamp_ns(msg.header), msg))

    def finish(self) -> Counter[str]:
        """End of stream; returns every drop reason with its count (matcher and runner)."""
        self.matcher.finish()
        return self.matcher.dropped + self.dropped

    def _run(self, matches: list[Match]) -> list[Output]:
        outputs = []
        for match in matches:
            output = self._step(match)
            if output is not None:
                outputs.append(output)
                if self._on_result is not None:
                    self._on_result(output)
        return outputs

    def _step(self, match: Match) -> Output | None:
        if match.stamp <= self._last:
            self.dropped["frame older than the previous one"] += 1
            return None
        try:
            image = image_to_bgr(match.image)
            dets, skipped = detections_from_msg(match.detections, self._ids, self.classes)
        except (InputError, ValueError, AttributeError, TypeError) as exc:
            reason = str(exc) if isinstance(exc, InputError) else f"malformed message ({type(exc).__name__})"
            self.dropped[reason] += 1
            return None
        if skipped:
            self.dropped["detection of another class"] += skipped
        self._last = match.stamp
        result = self.pipe.step(image, dets, match.stamp / 1e9, frame_index=self.frames)
        self.frames += 1
        record = result.to_json_dict()
        record["stamp_ns"] = match.stamp
        frame_id = str(match.image.header.frame_id)
        string = result_to_string(self.store, record)
        markers = result_to_markers(self.store, result, match.stamp, frame_id, self.colours)
        return Output(match.stamp, frame_id, image, result, record, string, markers)
