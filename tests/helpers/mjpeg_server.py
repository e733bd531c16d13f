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
                    self.wfile.write(part_header(len(data)))
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


def part_header(size: int) -> bytes:
    """The header of one multipart part: boundary, content type and length."""
    return f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {size}\r\n\r\n".encode()


class RestartableMjpegServer:
    """An MJPEG camera on 127.0.0.1 that can go away and come back on the same port (an outage): it serves
    frames at ``fps`` to every client until :meth:`stop`, which also cuts the open connections."""

    def __init__(self, fps: float = 10.0) -> None:
        self.fps, self.port, self.served = fps, 0, 0
        self._server: http.server.ThreadingHTTPServer | None = None
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/stream.mjpg"

    def start(self) -> RestartableMjpegServer:
        owner = self
        self._stopping.clear()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server API)
                self.send_response(200)
                self.send_header("Content-Type", f"multipart/x-mixed-replace;boundary={BOUNDARY}")
                self.end_headers()
                try:
                    while not owner._stopping.is_set():
                        data = frame_jpeg(owner.served)
                        owner.served += 1
                        self.wfile.write(part_header(len(data)))
                        self.wfile.write(data + b"\r\n")
                        self.wfile.flush()
                        time.sleep(1.0 / owner.fps)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        time.sleep(2.0 / self.fps)  # the handlers see the flag and close their connections
