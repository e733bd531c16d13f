"""A real RTSP server on 127.0.0.1 for tests of live sources: GStreamer's gst-rtsp-server serving a folder of
JPEG frames in a loop as RTP/JPEG, pushed live at a fixed frame rate (as a camera does).

Run by the system Python that has GStreamer's introspection bindings (Debian: ``python3-gi
gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good``), not by the project's virtual environment::

    /usr/bin/python3 tests/helpers/rtsp_server.py FRAMES_DIR PORT [FPS]

It prints ``ready`` once it listens and serves ``rtsp://127.0.0.1:PORT/stream`` until it is killed.
:func:`rtsp_available` tells whether this machine can run it (and why not), :func:`start_rtsp` starts it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
SYSTEM_PYTHON = "/usr/bin/python3"
_PROBE = (
    "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
    "from gi.repository import Gst, GstRtspServer; Gst.init(None); "
    "assert all(Gst.ElementFactory.find(e) for e in ('appsrc', 'rtpjpegpay', 'jpegparse'))"
)


def rtsp_available() -> str | None:
    """None when the RTSP server can run here, else why not (for ``pytest.skip``)."""
    if not Path(SYSTEM_PYTHON).is_file():
        return f"{SYSTEM_PYTHON} not found (the RTSP server needs the system Python's GStreamer bindings)"
    done = subprocess.run([SYSTEM_PYTHON, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return (
            "GStreamer's RTSP server is not installed (apt-get install python3-gi gir1.2-gst-rtsp-server-1.0 "
            f"gstreamer1.0-plugins-good): {last}"
        )
    return None


def start_rtsp(frames: Path, port: int, fps: int = 10) -> subprocess.Popen:
    """Start the server on ``port`` serving the ``%05d.jpg`` files of ``frames``; returns once it listens."""
    proc = subprocess.Popen(
        [SYSTEM_PYTHON, str(HERE), str(frames), str(port), str(fps)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(
            f"the RTSP server did not start: {line} {proc.stderr.read() if proc.stderr else ''}"
        )
    time.sleep(0.2)
    return proc


def _serve(frames: str, port: int, fps: int) -> None:
    import gi

    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtspServer

    Gst.init(None)
    jpegs = [p.read_bytes() for p in sorted(Path(frames).glob("*.jpg"))]
    state = {"src": None, "k": 0}
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(port))
    factory = GstRtspServer.RTSPMediaFactory()
    # a live source: frames are pushed on a timer at the frame rate and stamped when pushed, as a camera's are
    factory.set_launch(
        f"( appsrc name=src is-live=true format=time do-timestamp=true caps=image/jpeg,framerate={fps}/1 "
        "! jpegparse ! rtpjpegpay name=pay0 pt=26 )"
    )
    factory.set_shared(True)

    def configure(_factory: object, media: object) -> None:
        state["src"] = media.get_element().get_by_name_recurse_up("src")  # type: ignore[attr-defined]

    def push() -> bool:
        src = state["src"]
        if src is not None:
            data = jpegs[state["k"] % len(jpegs)]
            state["k"] += 1
            src.emit("push-buffer", Gst.Buffer.new_wrapped(data))
        return True

    factory.connect("media-configure", configure)
    server.get_mount_points().add_factory("/stream", factory)
    if server.attach(None) == 0:
        print("could not bind", flush=True)
        sys.exit(1)
    GLib.timeout_add(max(1, round(1000 / fps)), push)
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 10)
