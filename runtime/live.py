"""Live frame sources: a camera (device index or ``/dev/videoN``), an ``rtsp://`` / ``http(s)://`` stream, or a
GStreamer pipeline string, read by OpenCV on a capture thread with a latest-frame policy.

A robot's camera does not wait for the pipeline. The capture thread reads frames as they arrive and keeps
only the newest one; a frame that arrives while the consumer is still busy with an earlier one replaces the
undelivered frame, and that frame is counted in :attr:`LiveStats.dropped`. Timestamps are taken when a
frame is captured (seconds since the source opened, ``time.monotonic``), never from the frame count, so a
slow step shows as a gap in time rather than as a slowed-down clock.

A stream that stops delivering (the camera unplugged, the network stream ending) is reopened up to
:attr:`LiveOptions.reconnect_attempts` times in a row, :attr:`LiveOptions.reconnect_delay_s` apart; after that
the source ends and :attr:`LiveStats.ended` says why. Each frame is checked against
:func:`pairedge.core.limits.check_frame_size` before it is handed on (an oversize frame costs only itself).

Example::

    with LiveSource("0") as source:           # the first camera; "rtsp://...", "/dev/video2", a GStreamer pipeline
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
        reconnect_attempts: consecutive reopenings tried after the stream stops delivering, before the source
            ends (0: end at once); a reopening that delivers a frame resets the count.
        reconnect_delay_s: seconds between reopenings.
        open_timeout_s: how long to wait for the first frame after (re)opening.
    """

    reconnect_attempts: int = 3
    reconnect_delay_s: float = 0.5
    open_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.reconnect_attempts <= 1000:
            raise InputError(f"reconnect attempts: expected 0 to 1000, got {self.reconnect_attempts}")
        if not (0 <= self.reconnect_delay_s <= 60 and 0 < self.open_timeout_s <= 600):
            raise InputError(
                "reconnect delay / open timeout: expected 0-60 s and (0, 600] s, got "
                f"{self.reconnect_delay_s} / {self.open_timeout_s}"
            )


@dataclass
class LiveStats:
    """Counts of one live run (updated by the capture thread; read them after the loop).

    Attributes:
        captured: frames read from the source. delivered: frames handed to the consumer. dropped: frames
        replaced by a newer one before the consumer took them (the latest-frame policy). refused: frames
        over the size ceiling. reconnects: reopenings that delivered again. ended: why the source ended
        ("" while running).
    """

    captured: int = 0
    delivered: int = 0
    dropped: int = 0
    refused: int = 0
    reconnects: int = 0
    ended: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"captured": self.captured, "delivered": self.delivered, "dropped": self.dropped,
                "refused": self.refused, "reconnects": self.reconnects, "ended": self.ended}  # fmt: skip


#: Opens a capture: ``(target, api) -> cv2.VideoCapture``-like (``isOpened``, ``read``, ``release``).
CaptureFactory = Callable[[int | str, int], Any]


def _open_capture(target: int | str, api: int) -> Any:
    # a failed open makes OpenCV print its own warnings; pairedge says why in one line instead
    log = getattr(getattr(cv2, "utils", None), "logging", None)
    level = log.getLogLevel() if log is not None else None
    if log is not None:
        log.setLogLevel(log.LOG_LEVEL_ERROR)
    try:
        return cv2.VideoCapture(target, api)
    finally:
        if log is not None:
            log.setLogLevel(level)


class LiveSource:
    """A live source as ``(index, image, timestamp)``: capture counter, (H, W, 3) uint8 BGR, seconds since open.

    Args:
        spec: what :func:`live_target` accepts (or a :class:`LiveTarget`).
        options: reconnection and timeouts.
        capture_factory: opens the capture (tests pass a stand-in; the default is ``cv2.VideoCapture``).

    Raises:
        InputError: ``spec`` is not a live source. FormatError: it cannot be opened, or gives no frame
        within ``open_timeout_s`` (raised when the source is entered).
    """

    def __init__(
        self,
        spec: str | int | LiveTarget,
        options: LiveOptions | None = None,
        *,
        capture_factory: CaptureFactory = _open_capture,
    ) -> None:
        target = spec if isinstance(spec, LiveTarget) else live_target(spec)
        if target is None:
            raise InputError(
                f"{spec!r}: not a live source; expected a camera index, /dev/videoN, an rtsp:// or http:// URL, "
                "or a GStreamer pipeline ending in appsink (files and folders: FrameSource)"
            )
        self.target, self.options, self._factory = target, options or LiveOptions(), capture_factory
        self.stats = LiveStats()
        self._latest: tuple[int, np.ndarray, float] | None = None
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
            raise FormatError(self.target.describe(), "cannot open it (no such device, unreachable stream, or a "
                              "backend OpenCV was built without, e.g. GStreamer)")  # fmt: skip
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
            yield item

    # -- capture thread -------------------------------------------------------------------------------------
    def _run(self, capture: Any) -> None:
        index, attempts, reopened = 0, 0, False
        try:
            while not self._stop.is_set():
                ok, image = self._read(capture)
                if ok:
                    if reopened:  # the stream is back
                        self.stats.reconnects += 1
                        self.stats.notes.append(f"{self.target.describe()} delivers again (after {attempts} attempt(s))")
                    attempts, reopened = 0, False  # the bound is on consecutive failed reopenings
                    if self._accept(image):
                        self._offer(index, image)
                        index += 1
                    continue
                capture.release()
                capture = None
                if attempts >= self.options.reconnect_attempts:
                    self._finish(f"the stream stopped delivering frames ({attempts} reconnection(s) tried)")
                    return
                attempts += 1
                if self._stop.wait(self.options.reconnect_delay_s):
                    return
                capture = self._factory(self.target.target, self.target.api)
                reopened = True
        finally:
            if capture is not None:
                capture.release()
            self._finish(self.stats.ended or "closed")

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
                raise FormatError(self.target.describe(), f"frame of shape {image.shape} {image.dtype}; "
                                  "expected (H, W, 3) uint8")  # fmt: skip
            limits.check_frame_size(image.shape[1], image.shape[0], self.target.describe())
        except FormatError as exc:
            self.stats.refused += 1
            if len(self.stats.notes) < 20:
                self.stats.notes.append(str(exc))
            return False
        self.size = self.size or (int(image.shape[1]), int(image.shape[0]))
        return True

    def _offer(self, index: int, image: np.ndarray) -> None:
        stamp = time.monotonic() - self._start
        with self._cond:
            if self._latest is not None:
                self.stats.dropped += 1  # the consumer was busy: the newer frame wins
            self._latest = (index, image, stamp)
            self._cond.notify_all()

    def _finish(self, reason: str) -> None:
        with self._cond:
            self._done = True
            self.stats.ended = self.stats.ended or reason
            self._cond.notify_all()


def is_live(spec: str | Path | int) -> bool:
    """Whether ``spec`` names a live source (and not an existing file or folder)."""
    if isinstance(spec, Path) or (isinstance(spec, str) and Path(spec).expanduser().exists()):
        return False
    return live_target(spec) is not None
