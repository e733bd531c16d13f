"""``pairedge run`` on live streams that go away and come back: a real RTSP server (GStreamer's
gst-rtsp-server on 127.0.0.1) and an HTTP MJPEG camera, each stopped for 5 s mid-run and restarted."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import cv2
import pytest
from mjpeg_server import RestartableMjpegServer
from pairedge.measure.sim import Scene, get_preset
from pairedge.runtime.runner.live import LiveOptions
from pairedge.runtime.runner.run import RunOptions
from pairedge.runtime.runner.stream import run_live
from rtsp_server import rtsp_available, start_rtsp

OUTAGE_S = 5.0
pytestmark = pytest.mark.slow


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_through_an_outage(url: str, out: Path, stop, restart, before: int = 15, total: int = 40) -> dict:
    """Run until ``before`` frames are scored, stop the server for OUTAGE_S, restart it, run to ``total``."""
    counted = []
    seen = threading.Event()

    def on_frame(result) -> None:
        counted.append(time.monotonic())
        if len(counted) >= before:
            seen.set()

    options = RunOptions(max_frames=total, video=False)
    live = LiveOptions(reconnect_s=30.0, read_timeout_s=2.0)
    result: dict = {}
    thread = threading.Thread(
        target=lambda: result.update(summary=run_live(url, out, options, live, on_frame))
    )
    thread.start()
    try:
        assert seen.wait(60), "the stream never delivered"
        stop()
        time.sleep(OUTAGE_S)
        restart()
        thread.join(120)
    finally:
        stop()
    assert not thread.is_alive() and "summary" in result
    return json.loads((out / "summary.json").read_text())


def check(out: Path, summary: dict, total: int = 40) -> None:
    live = summary["live"]
    assert summary["frames"] == total and live["outages"] >= 1 and live["reconnects"] == live["outages"]
    assert live["reconnect_attempts"] >= 1 and "max-frames" in " ".join(summary["notes"])
    notes = " ".join(summary["notes"])
    assert f"{live['reconnects']} reconnection(s)" in notes
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()[1:]]
    stamps = [r["timestamp"] for r in records]
    gap = max(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    assert gap >= OUTAGE_S - 0.5  # frames from before and after the outage, in capture time
    cut = next(i for i, (a, b) in enumerate(zip(stamps, stamps[1:], strict=False)) if b - a == gap) + 1
    before = {t["id"] for r in records[:cut] for t in r["tracks"]}
    after = {t["id"] for r in records[cut:] for t in r["tracks"]}
    assert before and after and min(after) > max(before)  # a new segment: new ids, still increasing


@pytest.fixture(scope="module")
def frames_dir(tmp_path_factory) -> Path:
    """JPEG frames of a simulated scene with people (the bundled detector finds them)."""
    folder = tmp_path_factory.mktemp("frames")
    for f in Scene(get_preset("static", 1000), 1000).frames(30):
        cv2.imwrite(str(folder / f"{f.index:05d}.jpg"), f.image)
    return folder


def test_rtsp_stream_survives_a_five_second_outage(tmp_path, frames_dir) -> None:
    why = rtsp_available()
    if why:
        pytest.skip(why)
    port = free_port()
    server = {"proc": start_rtsp(frames_dir, port)}

    def stop() -> None:
        proc = server["proc"]
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def restart() -> None:
        server["proc"] = start_rtsp(frames_dir, port)

    summary = run_through_an_outage(f"rtsp://127.0.0.1:{port}/stream", tmp_path / "out", stop, restart)
    check(tmp_path / "out", summary)


def test_http_mjpeg_stream_survives_a_five_second_outage(tmp_path) -> None:
    camera = RestartableMjpegServer(fps=10.0).start()
    summary = run_through_an_outage(camera.url, tmp_path / "out", camera.stop, camera.start)
    live = summary["live"]
    assert summary["frames"] == 40 and live["reconnects"] == live["outages"] >= 1
