"""Live sources: the latest-frame policy, capture timestamps, reconnection with backoff within a time
budget, finite sources that end, and a real MJPEG stream served on the loopback address."""

from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest
from mjpeg_server import mjpeg_server
from pairedge.core.errors import FormatError, InputError
from pairedge.runtime.runner.live import LiveOptions, LiveSource, is_live, live_target


class FakeCapture:
    """A capture that delivers ``frames`` frames (``gap_s`` apart), then fails; ``shape`` per frame."""

    def __init__(self, frames: int, gap_s: float = 0.0, shape: tuple[int, ...] = (48, 64, 3)) -> None:
        self.left, self.gap_s, self.shape, self.released = frames, gap_s, shape, False

    def isOpened(self) -> bool:  # noqa: N802 (OpenCV's API)
        return not self.released

    def read(self) -> tuple[bool, np.ndarray | None]:
        if self.left <= 0:
            return False, None
        self.left -= 1
        time.sleep(self.gap_s)
        return True, np.full(self.shape, self.left % 255, np.uint8)

    def release(self) -> None:
        self.released = True


def test_targets() -> None:
    assert live_target(0).kind == "camera" and live_target("2").target == 2
    assert live_target("/dev/video3").target == 3 and live_target("/dev/video3").api == cv2.CAP_V4L2
    assert live_target("rtsp://user:pw@cam/stream").describe() == "stream rtsp://***@cam/stream"
    assert live_target("http://127.0.0.1:8080/x.mjpg").api == cv2.CAP_FFMPEG
    gst = live_target("nvarguscamerasrc ! nvvidconv ! video/x-raw,format=BGRx ! videoconvert ! appsink")
    assert gst is not None and gst.api == cv2.CAP_GSTREAMER
    assert live_target("walk.mp4") is None and live_target("frames/") is None
    assert not is_live("walk.mp4") and is_live("0")


def test_not_live_and_unopenable_are_one_line_errors() -> None:
    with pytest.raises(InputError, match="not a live source"):
        LiveSource("walk.mp4")

    class Closed(FakeCapture):
        def isOpened(self) -> bool:  # noqa: N802
            return False

    with pytest.raises(FormatError, match="cannot open it"):
        LiveSource("0", capture_factory=lambda t, a: Closed(0)).open()
    with pytest.raises(FormatError, match="stopped delivering"):  # opens, but never a frame
        LiveSource("0", LiveOptions(reconnect_s=0), capture_factory=lambda t, a: FakeCapture(0)).open()
    with pytest.raises(InputError, match="reconnect_s"):
        LiveOptions(reconnect_s=-1)
    with pytest.raises(InputError, match="reconnect_max_delay_s"):
        LiveOptions(reconnect_delay_s=2, reconnect_max_delay_s=1)


def test_a_busy_consumer_gets_the_latest_frame_and_the_rest_are_counted() -> None:
    source = LiveSource("0", LiveOptions(reconnect_s=0), capture_factory=lambda t, a: FakeCapture(40, 0.002))
    got = []
    with source:
        for index, _image, stamp in source:
            got.append((index, stamp))
            time.sleep(0.01)  # slower than the camera
    s = source.stats
    assert s.captured == 40 and s.delivered == len(got) and s.dropped == 40 - len(got) > 0
    indices, stamps = zip(*got, strict=True)
    assert list(indices) == sorted(indices) and indices[-1] == 39  # the newest frame always wins
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))  # capture time, increasing
    assert "stopped delivering" in s.ended


def test_reconnection_backs_off_within_its_budget_and_is_counted_once() -> None:
    opened: list[float] = []

    def factory(target: int | str, api: int) -> FakeCapture:
        opened.append(time.monotonic())
        # delivers, fails twice, delivers (one outage, 2 failed reopenings), then is gone for good
        return FakeCapture({1: 5, 4: 5}.get(len(opened), 0))

    options = LiveOptions(reconnect_s=0.5, reconnect_delay_s=0.02, reconnect_max_delay_s=0.08)
    source = LiveSource("0", options, capture_factory=factory)
    segments = []
    with source:
        frames = [(index, source.segment) for index, _, _ in source]
        segments = sorted({seg for _, seg in frames})
    s = source.stats
    assert s.captured == 10 and frames[-1][0] == 9 and segments == [0, 1]  # a new segment after the outage
    assert s.outages == 2 and s.reconnects == 1 and s.attempts == len(opened) - 1
    waits = np.diff(opened[4:])  # the last outage: 0.02, 0.04, 0.08, 0.08, ... until 0.5 s are used up
    assert len(waits) >= 3 and waits[1] > 1.5 * waits[0] and waits.max() < 0.2
    assert "stopped delivering" in s.ended and "budget 0.5 s" in s.ended
    assert s.to_dict()["reconnects"] == 1 and s.to_dict()["reconnect_attempts"] == s.attempts


def test_a_finite_source_ends_at_its_last_frame() -> None:
    """A video behind http:// reports its frame count: reaching it is the end, not an outage."""

    class File(FakeCapture):
        def __init__(self) -> None:
            super().__init__(6)
            self.pos = 0

        def read(self) -> tuple[bool, np.ndarray | None]:
            ok, image = super().read()
            self.pos += ok
            return ok, image

        def get(self, prop: int) -> float:
            return 6.0 if prop == cv2.CAP_PROP_FRAME_COUNT else float(self.pos)

    opened = []
    source = LiveSource(
        "http://127.0.0.1:9/v.mp4",
        LiveOptions(reconnect_s=30),
        capture_factory=lambda t, a: opened.append(1) or File(),
    )
    start = time.monotonic()
    with source:
        frames = [index for index, _, _ in source]
    assert frames[-1] == 5 and len(opened) == 1 and source.stats.outages == 0
    assert "end of the stream (6 frames)" in source.stats.ended and time.monotonic() - start < 5


def test_oversize_and_malformed_frames_cost_only_themselves() -> None:
    shapes = iter([(48, 64, 3), (48, 64), (20_000, 20_000, 3), (48, 64, 3)])

    class Mixed(FakeCapture):
        def read(self) -> tuple[bool, np.ndarray | None]:
            shape = next(shapes, None)
            if shape is None:
                return False, None
            if shape[0] == 20_000:  # do not allocate 1.2 GB: a view with that shape
                return True, np.lib.stride_tricks.as_strided(np.zeros(3, np.uint8), shape, (0, 0, 1))
            return True, np.zeros(shape, np.uint8)

    source = LiveSource("0", LiveOptions(reconnect_s=0), capture_factory=lambda t, a: Mixed(0))
    with source:
        got = [image.shape for _, image, _ in source]
    assert source.stats.refused == 2 and source.stats.captured == 4 and len(got) >= 1


def test_close_stops_a_running_camera_promptly() -> None:
    source = LiveSource("0", capture_factory=lambda t, a: FakeCapture(10**9, 0.001))
    with source:
        for index, _, _ in source:
            if index >= 5:
                break
    assert source.stats.ended == "closed" and not any(
        t.name == "pairedge-live" for t in threading.enumerate()
    )


def test_loopback_mjpeg_stream_with_drops_and_a_stream_that_dies() -> None:
    start = time.monotonic()
    with mjpeg_server(frames=40, fps=50.0) as url:
        source = LiveSource(url, LiveOptions(reconnect_s=0.5, reconnect_delay_s=0.05, open_timeout_s=10))
        with source:
            got = []
            for _index, image, _stamp in source:
                got.append(image.shape)
                time.sleep(0.05)  # a step slower than the camera's 20 ms
    s = source.stats
    assert got and all(shape == (120, 160, 3) for shape in got)
    assert s.captured >= 30 and s.dropped > 0 and s.delivered + s.dropped == s.captured
    assert "stopped delivering" in s.ended  # the server served once; the reconnection was refused
    assert time.monotonic() - start < 30


def test_pairedge_run_on_a_loopback_stream_writes_the_summary(tmp_path) -> None:
    """`pairedge run http://...` with an ONNX detector: every delivered frame scored, drops in the notes, and
    a stream that dies mid-run still ends with its summary (exit 0)."""
    import json

    from detector_models import ultralytics_model
    from pairedge.apps.cli import app
    from run_demo_helpers import toy_model
    from typer.testing import CliRunner

    rows = np.array([[60, 60, 30, 80, 0.9], [120, 60, 30, 80, 0.8]], np.float32)  # cx cy w h score (160 px)
    model = ultralytics_model(tmp_path / "det.onnx", rows, size=(160, 160))
    out = tmp_path / "out"
    with mjpeg_server(frames=30, fps=30.0) as url:
        result = CliRunner().invoke(
            app,
            [
                "run",
                url,
                "--detector",
                str(model),
                "--model",
                str(toy_model(tmp_path / "m")),
                "--no-video",
                "--out",
                str(out),
                "--reconnect-s",
                "1",
            ],
        )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    notes = " ".join(summary["notes"])
    assert "live stream http://127.0.0.1" in notes and "the source ended" in notes and "captured" in notes
    assert 0 < summary["frames"] <= 30 and summary["frames_scored"] == summary["frames"]
    lines = (out / "results.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["live"] is True and len(lines) == summary["frames"] + 1


def test_pairedge_run_live_refuses_a_detection_file(tmp_path) -> None:
    from pairedge.apps.cli import app
    from typer.testing import CliRunner

    mot = tmp_path / "d.txt"
    mot.write_text("1,-1,10,10,20,40,1,-1,-1,-1\n")
    result = CliRunner().invoke(app, ["run", "rtsp://127.0.0.1:9/none", "-d", str(mot)])
    assert result.exit_code == 1 and "a live source has no detection file" in result.output
