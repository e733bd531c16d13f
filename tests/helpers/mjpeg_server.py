"""A loopback MJPEG-over-HTTP server for tests of live sources: ``multipart/x-mixed-replace`` JPEG frames, as
IP cameras serve them, for a bounded number of frames; then the connection closes (a stream that dies)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import cv2
import numpy as np

BOUNDARY = "pairedgeframe"


def frame_jpeg(k: int, size: tuple[int, int] = (160, 120)) -> bytes:
    """JPEG of a (H, W, 3) frame whose left column encodes ``k`` (a moving bar over noise)."""
    w, h = size
    rng = np.random.default_rng(k)
    image = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    x = (k * 7) % (w - 10)
    image[:, x : x + 10] = 255
    ok, data = cv2.imencode(".jpg", image)
    assert ok
    return data.tobytes()


@contextmanager
def mjpeg_server(frames: int, fps: float = 50.0, *, serve_once: bool = True) -> Iterator[str]:
    """Serve ``frames`` frames at ``fps`` to each client, then close; yields the stream URL. With
    ``serve_once`` the server stops accepting after the first client (a reconnection then fails)."""
    served = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            if serve_once and served.is_set():
                self.send_error(503)
                return
            served.set()
            self.send_response(200)
            self.send_header("Content-Type", f"multipart/x-mixed-replace;boundary={BOUNDARY}")
            self.end_headers()
            try:
                for k in range(frames):
                    data = frame_jpeg(k)
                    self.wfile.write(f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(data)}\r\n\r\n".encode())
                    self.wfile.write(data + b"\r\n")
                    self.wfile.flush()
                    time.sleep(1.0 / fps)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/stream.mjpg"
    finally:
        server.shutdown()
        server.server_close()
