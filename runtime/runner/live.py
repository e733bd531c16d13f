"""Live frame sources: a camera (device index or ``/dev/videoN``), an ``rtsp://`` / ``http(s)://`` stream, or
a GStreamer pipeline string, read by OpenCV on a capture thread with a latest-frame policy.

A robot's camera does not wait for the pipeline. The capture thread reads frames as they arrive and keeps
only the newest one; a frame that arrives while the consumer is still busy with an earlier one replaces the
undelivered frame, and that frame is counted in :attr:`LiveStats.dropped`. Timestamps are taken when a
frame is captured (seconds since the source opened, ``time.monotonic``), never from the frame count, so a
slow step shows as a gap in time rather than as a slowed-down clock.

A live stream that stops delivering (the camera unplugged, the network or the server gone) is an outage: it
is reopened with exponential backoff (:attr:`LiveOptions.reconnect_delay_s`, doubling up to
:attr:`LiveOptions.reconnect_max_delay_s`) for up to :attr:`LiveOptions.reconnect_s` seconds (30 by default);
when it delivers again that is one reconnection (:attr:`LiveStats.reconnects`, the count that the summary,
the notes and ``summary.json`` give) and a new *segment* starts (:attr:`LiveSource.segment`: the runner
starts the pipeline's stream state afresh, so people come back with new ids, as after a scene cut). When the
outage outlasts the budget the source ends and :attr:`LiveStats.ended` says why. A *finite* source (a video
file behind an ``http://`` URL: OpenCV reports its frame count) that reaches its last frame ends there and is
never reopened. A network stream silent for :attr:`LiveOptions.read_timeout_s` counts as stopped (FFmpeg's
read timeout, set when it is opened). Each frame is checked against
:func:`pairedge.core.limits.check_frame_size` before it is handed on (an oversize frame costs only itself).

Example::

    # "0": the first camera; or "rtsp://...", "/dev/video2", a GStreamer pipeline
    with LiveSource("0") as source:
        for index, image, timestamp in source:
            result = pipe.step(image, detector(image), timestamp)
    print(source.stats)

On a Jetson the CSI camera is a GStreamer pipeline (OpenCV must be built with GStreamer, as JetPack's is)::

    nvarguscamerasrc ! video/x-raw(memory:NVMM),width=1280,height=720,framerate=30/1 ! nvvidconv !
    video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR ! appsink drop=true max-buffers=1
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import cv2
import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError, InputError

_URL = re.compile(r"^(rtsp|rtsps|http|https|rtmp|udp|tcp)://", re.IGNORECASE)
_DEVICE = re.compile(r"^/dev/video(\d+)$")


@dataclass(frozen=True)
class LiveTarget:
    """What to open: ``kind`` "camera" (``target`` an int index), "stream" (a URL) or "gstreamer" (a
    pipeline string), and the OpenCV capture API to open it with."""

    kind: str
    target: int | str
    api: int = cv2.CAP_ANY

    def describe(self) -> str:
        """One line for notes (a URL's credentials are not shown)."""
        if self.kind == "camera":
            return f"camera {self.target}"
        if self.kind == "stream":
            return "stream " + re.sub(r"//[^/@]*@", "//***@", str(self.target))
        return "GStreamer pipeline"


def live_target(spec: str | int) -> LiveTarget | None:
    """The live source ``spec`` names, or None when it is not live (a file or an image folder).

    Live: an integer (``0``, ``"1"``), ``/dev/videoN``, a URL (``rtsp://``, ``http(s)://``, ``rtmp://``,
    ``udp://``, ``tcp://``), or a GStreamer pipeline (a string with ``!`` between elements, ending in
    ``appsink``).
    """
    if isinstance(spec, int):
        return LiveTarget("camera", spec)
    text = str(spec).strip()
    if text.isdigit():
        return LiveTarget("camera", int(text))
    device = _DEVICE.match(text)
    if device is not None:
        return LiveTarget("camera", int(device.group(1)), cv2.CAP_V4L2)
    if _URL.match(text):
        return LiveTarget("stream", text, cv2.CAP_FFMPEG)
    if "!" in text and "appsink" in text:
        return LiveTarget("gstreamer", text, cv2.CAP_GSTREAMER)
    return None


@dataclass(frozen=True)
class LiveOptions:
    """How a live source behaves.

    Attributes:
        reconnect_s: how long an outage may last, seconds, while the stream is reopened, before the source
            ends (0: end at the first failed read).
        reconnect_delay_s: the wait before the first reopening of an outage; it doubles after each failed one.
        reconnect_max_delay_s: the longest wait between two reopenings.
        open_timeout_s: how long to wait for the first frame after opening.
        read_timeout_s: a network stream that delivers nothing for this long counts as stopped.
    """

    reconnect_s: float = 30.0
    reconnect_delay_s: float = 0.5
    reconnect_max_delay_s: float = 4.0
    open_timeout_s: float = 10.0
    read_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        checks = {
            "reconnect_s": (0.0, 86400.0),
            "reconnect_delay_s": (0.0, 60.0),
            "reconnect_max_delay_s": (0.0, 600.0),
            "open_timeout_s": (0.001, 600.0),
            "read_timeout_s": (0.001, 600.0),
        }
        for name, (low, high) in checks.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise InputError(f"live {name}: expected seconds in [{low:g}, {high:g}], got {value!r}")
        if self.reconnect_max_delay_s < self.reconnect_delay_s:
            raise InputError(
                f"live reconnect_max_delay_s: expected >= reconnect_delay_s ({self.reconnect_delay_s:g}), "
                f"got {self.reconnect_max_delay_s:g}"
            )


@dataclass
class LiveStats:
    """Counts of one live run (updated by the capture thread; read them after the loop).

    Attributes:
        captured: frames read from the source. delivered: frames handed to the consumer. dropped: frames
        replaced by a newer one before the consumer took them (the latest-frame policy). refused: frames
        over the size ceiling. outages: times the stream stopped delivering. reconnects: outages after which
        it delivered again (the reconnections). attempts: reopenings tried, in all outages. ended: why the
        source ended ("" while running).
    """

    captured: int = 0
    delivered: int = 0
    dropped: int = 0
    refused: int = 0
    outages: int = 0
    reconnects: int = 0
    attempts: int = 0
    ended: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "captured": self.captured,
            "delivered": self.delivered,
            "dropped": self.dropped,
            "refused": self.refused,
            "outages": self.outages,
            "reconnects": self.reconnects,
            "reconnect_attempts": self.attempts,
            "ended": self.ended,
        }


#: Opens a capture: ``(target, api) -> cv2.VideoCapture``-like (``isOpened``, ``read``, ``release``).
CaptureFactory = Callable[[int | str, int], Any]


def _open_capture(target: int | str, api: int, timeouts: tuple[float, float] | None = None) -> Any:
    """``cv2.VideoCapture(target, api)``; for FFmpeg streams with ``timeouts`` (open, read) in seconds."""
    # a failed open makes OpenCV print its own warnings; pairedge says why in one line instead
    log = getattr(getattr(cv2, "utils", None), "logging", None)
    level = log.getLogLevel() if log is not None else None
    if log is not None:
        log.setLogLevel(log.LOG_LEVEL_ERROR)
    try:
        if timeouts is not None and api == cv2.CAP_FFMPEG:
            params = [
                cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
                int(timeouts[0] * 1000),
                cv2.CAP_PROP_READ_TIMEOUT_MSEC,
                int(timeouts[1] * 1000),
            ]
            return cv2.VideoCapture(target, api, params)
        return cv2.VideoCapture(target, api)
    finally:
        if log is not None:
            log.setLogLevel(level)


class LiveSource:
    """A live source as ``(index, image, timestamp)``: capture counter, (H, W, 3) uint8 BGR, seconds since
    open.

    Args:
        spec: what :func:`live_target` accepts (or a :class:`LiveTarget`).
        options: reconnection and timeouts.
        capture_factory: opens the capture (tests pass a stand-in; the default is ``cv2.VideoCapture`` with
            the options' timeouts).

    Raises:
        InputError: ``spec`` is not a live source. FormatError: it cannot be opened, or gives no frame
        within ``open_timeout_s`` (raised when the source is entered).
    """

    def __init__(
        self,
        spec: str | int | LiveTarget,
        options: LiveOptions | None = None,
        *,
        capture_factory: CaptureFactory | None = None,
    ) -> None:
        target = spec if isinstance(spec, LiveTarget) else live_target(spec)
        if target is None:
            raise InputError(
                f"{spec!r}: not a live source; expected a camera index, /dev/videoN, an rtsp:// or http:// "
                "URL, or a GStreamer pipeline ending in appsink (files and folders: FrameSource)"
            )
        self.target, self.options = target, options or LiveOptions()
        timeouts = (self.options.open_timeout_s, self.options.read_timeout_s)
        self._factory: CaptureFactory = capture_factory or (lambda t, api: _open_capture(t, api, timeouts))
        self.stats = LiveStats()
        #: The segment of the frame last delivered: 0, then one more after each reconnection.
        self.segment = 0
        self._latest: tuple[int, np.ndarray, float, int] | None = None
        self._done = False
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._start = 0.0
        self.size: tuple[int, int] | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------
    def __enter__(self) -> LiveSource:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> None:
        """Open the source and start the capture thread; returns once the first frame arrived."""
        capture = self._factory(self.target.target, self.target.api)
        if capture is None or not capture.isOpened():
            if capture is not None:
                capture.release()
            raise FormatError(
                self.target.describe(),
                "cannot open it (no such device, unreachable stream, or a "
                "backend OpenCV was built without, e.g. GStreamer)",
            )
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(capture,), name="pairedge-live", daemon=True)
        self._thread.start()
        with self._cond:
            self._cond.wait_for(lambda: self._latest is not None or self._done, self.options.open_timeout_s)
            if self._latest is None:
                first_problem = self.stats.ended or f"no frame within {self.options.open_timeout_s:g} s"
                self._stop.set()
                raise FormatError(self.target.describe(), first_problem)

    def close(self) -> None:
        """Stop the capture thread and release the device (safe to call twice)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if not self.stats.ended:
            self.stats.ended = "closed"

    # -- consumer -------------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[tuple[int, np.ndarray, float]]:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._latest is not None or self._done or self._stop.is_set())
                item, self._latest = self._latest, None
                if item is None:
                    return
                self.stats.delivered += 1
            self.segment = item[3]
            yield item[0], item[1], item[2]

    # -- capture thread -------------------------------------------------------------------------------------
    def _run(self, capture: Any) -> None:
        index, segment = 0, 0
        down_since: float | None = None  # when the current outage began
        tries, delay = 0, self.options.reconnect_delay_s
        try:
            while not self._stop.is_set():
                ok, image = self._read(capture)
                if ok:
                    if down_since is not None:  # the stream is back
                        segment += 1
                        self.stats.reconnects += 1
                        self._note(
                            f"{self.target.describe()} delivers again after "
                            f"{time.monotonic() - down_since:.1f} s ({tries} reopening(s))"
                        )
                        down_since, tries, delay = None, 0, self.options.reconnect_delay_s
                    if self._accept(image):
                        self._offer(index, image, segment)
                        index += 1
                    continue
                if down_since is None and _at_end(capture):
                    self._finish(f"the end of the stream ({_frame_count(capture)} frames)")
                    return
                if capture is not None:
                    capture.release()
                    capture = None
                now = time.monotonic()
                if down_since is None:
                    down_since = now
                    self.stats.outages += 1
                left = self.options.reconnect_s - (now - down_since)
                if left <= 0:
                    self._finish(
                        f"the stream stopped delivering frames: {tries} reopening(s) over "
                        f"{now - down_since:.1f} s (reconnect budget {self.options.reconnect_s:g} s)"
                    )
                    return
                if self._stop.wait(min(delay, left)):
                    return
                delay = min(2 * delay, self.options.reconnect_max_delay_s)
                tries += 1
                self.stats.attempts += 1
                capture = self._factory(self.target.target, self.target.api)
        finally:
            if capture is not None:
                capture.release()
            self._finish(self.stats.ended or "closed")

    def _note(self, text: str) -> None:
        if len(self.stats.notes) < 20:
            self.stats.notes.append(text)

    def _read(self, capture: Any) -> tuple[bool, np.ndarray | None]:
        if capture is None or not capture.isOpened():
            return False, None
        try:
            ok, image = capture.read()
        except cv2.error:
            return False, None
        return bool(ok and image is not None), image

    def _accept(self, image: np.ndarray) -> bool:
        self.stats.captured += 1
        try:
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise FormatError(
                    self.target.describe(),
                    f"frame of shape {image.shape} {image.dtype}; expected (H, W, 3) uint8",
                )
            limits.check_frame_size(image.shape[1], image.shape[0], self.target.describe())
        except FormatError as exc:
            self.stats.refused += 1
            if len(self.stats.notes) < 20:
                self.stats.notes.append(str(exc))
            return False
        self.size = self.size or (int(image.shape[1]), int(image.shape[0]))
        return True

    def _offer(self, index: int, image: np.ndarray, segment: int) -> None:
        stamp = time.monotonic() - self._start
        with self._cond:
            if self._latest is not None:
                self.stats.dropped += 1  # the consumer was busy: the newer frame wins (with its segment)
            self._latest = (index, image, stamp, segment)
            self._cond.notify_all()

    def _finish(self, reason: str) -> None:
        with self._cond:
            self._done = True
            self.stats.ended = self.stats.ended or reason
            self._cond.notify_all()


def _frame_count(capture: Any) -> int:
    """The frames a finite source reports (a file, also behind http://); 0 for a live stream or a stand-in."""
    try:
        count = float(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    except (AttributeError, cv2.error, TypeError, ValueError):
        return 0
    return int(count) if np.isfinite(count) and 0 < count < 2**31 else 0


def _at_end(capture: Any) -> bool:
    """Whether a failed read is the end of a finite source: it reports a frame count and its position has
    reached it (a live stream reports none; a finite one cut mid-way has not reached it)."""
    if capture is None:
        return False
    count = _frame_count(capture)
    if count == 0:
        return False
    try:
        position = float(capture.get(cv2.CAP_PROP_POS_FRAMES))
    except (AttributeError, cv2.error, TypeError, ValueError):
        return False
    return bool(np.isfinite(position) and position >= count - 1)


def is_live(spec: str | Path | int) -> bool:
    """Whether ``spec`` names a live source (and not an existing file or folder)."""
    if isinstance(spec, Path) or (isinstance(spec, str) and Path(spec).expanduser().exists()):
        return False
    return live_target(spec) is not None
