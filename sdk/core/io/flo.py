"""Middlebury ``.flo`` optical-flow files (the format of MPI-Sintel and the Middlebury benchmark).

Layout, little-endian: float32 magic ``202021.25`` (the bytes ``PIEH``), int32 width, int32 height, then
``height * width * 2`` float32 values, row-major, ``u`` (x) and ``v`` (y) interleaved. Values above 1e9
mark unknown flow. The declared size is bounded by the frame ceilings of :mod:`pairedge.core.limits`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pairedge.core import limits
from pairedge.core.errors import FormatError

MAGIC = 202021.25
#: Flow components larger than this are "unknown" in the Middlebury convention.
UNKNOWN_THRESHOLD = 1e9
HEADER_BYTES = 12
EXPECTED = "a Middlebury .flo optical-flow file"


def read_flo(path: str | Path) -> np.ndarray:
    """Read a ``.flo`` file, bounded before its data is read.

    The file must be a regular file (a FIFO or a device is refused unopened); the width and height its
    header declares must pass :func:`pairedge.core.limits.check_frame_size` (``MAX_FRAME_PIXELS``,
    ``MAX_FRAME_SIDE``) and agree with the file's size on disk before the ``8 * width * height`` data
    bytes are read.

    Returns:
        (H, W, 2) float32 flow in pixels, ``[..., 0]`` = x displacement, ``[..., 1]`` = y displacement.

    Raises:
        FormatError: not a regular file, wrong magic number, a size above the frame ceiling, or a file
            whose length disagrees with its header (truncated or with trailing bytes).
    """
    p = Path(path)
    size = limits.regular_file(p, EXPECTED)
    try:
        with open(p, "rb") as fh:
            width, height = _header(p, fh.read(HEADER_BYTES))
            expected = HEADER_BYTES + 8 * width * height
            if size != expected:
                raise FormatError(
                    p, f"expected {expected} bytes for a {width}x{height} flow field, got {size} (truncated?)"
                )
            raw = fh.read(expected - HEADER_BYTES + 1)  # + 1: a file that grew since stat is noticed
    except OSError as exc:
        raise FormatError(p, f"cannot read the file ({exc.strerror or exc}); expected {EXPECTED}") from None
    if len(raw) != expected - HEADER_BYTES:
        raise FormatError(p, f"changed size while it was read; expected {expected} bytes")
    return np.frombuffer(raw, "<f4").reshape(height, width, 2).astype(np.float32)


def _header(path: Path, header: bytes) -> tuple[int, int]:
    """``(width, height)`` of a 12-byte ``.flo`` header, checked against the frame ceilings."""
    if len(header) < HEADER_BYTES:
        raise FormatError(path, f"expected a 12-byte .flo header, got {len(header)} bytes")
    magic = float(np.frombuffer(header, "<f4", count=1)[0])
    if magic != MAGIC:
        raise FormatError(path, f"expected the .flo magic number {MAGIC} ('PIEH'), got {magic!r}")
    width, height = (int(v) for v in np.frombuffer(header, "<i4", count=2, offset=4))
    limits.check_frame_size(width, height, str(path))
    return width, height


def write_flo(path: str | Path, flow: np.ndarray) -> None:
    """Write (H, W, 2) float flow as a ``.flo`` file (used by tests and tools)."""
    arr = np.asarray(flow)
    if arr.ndim != 3 or arr.shape[2] != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise FormatError(path, f"expected a (H, W, 2) flow array, got shape {arr.shape}")
    height, width = arr.shape[:2]
    header = np.array([MAGIC], "<f4").tobytes() + np.array([width, height], "<i4").tobytes()
    Path(path).write_bytes(header + np.ascontiguousarray(arr, "<f4").tobytes())


def endpoint_error(flow: np.ndarray, truth: np.ndarray, valid: np.ndarray | None = None) -> float:
    """Mean end-point error (pixels) of ``flow`` against ``truth``, both (H, W, 2).

    Pixels whose truth is unknown (> 1e9) or where ``valid`` (H, W) bool is False are ignored.
    """
    if flow.shape != truth.shape:
        raise FormatError("<flow>", f"expected flow of shape {truth.shape}, got {flow.shape}")
    known = np.all(np.abs(truth) < UNKNOWN_THRESHOLD, axis=2)
    if valid is not None:
        known &= valid
    if not known.any():
        return float("nan")
    diff = flow[known] - truth[known]
    return float(np.sqrt((diff * diff).sum(axis=1)).mean())
