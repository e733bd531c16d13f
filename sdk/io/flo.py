"""Middlebury ``.flo`` optical-flow files (the format of MPI-Sintel and the Middlebury benchmark).

Layout, little-endian: float32 magic ``202021.25`` (the bytes ``PIEH``), int32 width, int32 height, then
``height * width * 2`` float32 values, row-major, ``u`` (x) and ``v`` (y) interleaved. Values above 1e9
mark unknown flow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pairedge.errors import FormatError

MAGIC = 202021.25
#: Flow components larger than this are "unknown" in the Middlebury convention.
UNKNOWN_THRESHOLD = 1e9
_MAX_SIDE = 1 << 16


def read_flo(path: str | Path) -> np.ndarray:
    """Read a ``.flo`` file.

    Returns:
        (H, W, 2) float32 flow in pixels, ``[..., 0]`` = x displacement, ``[..., 1]`` = y displacement.

    Raises:
        FormatError: wrong magic number, implausible size or truncated data.
    """
    raw = Path(path).read_bytes()
    if len(raw) < 12:
        raise FormatError(path, f"expected a 12-byte .flo header, got {len(raw)} bytes")
    magic = float(np.frombuffer(raw, "<f4", count=1)[0])
    if magic != MAGIC:
        raise FormatError(path, f"expected the .flo magic number {MAGIC} ('PIEH'), got {magic!r}")
    width, height = (int(v) for v in np.frombuffer(raw, "<i4", count=2, offset=4))
    if not (0 < width < _MAX_SIDE and 0 < height < _MAX_SIDE):
        raise FormatError(path, f"expected a width and height in 1..{_MAX_SIDE - 1}, got {width}x{height}")
    expected = 12 + 8 * width * height
    if len(raw) != expected:
        raise FormatError(
            path, f"expected {expected} bytes for a {width}x{height} flow field, got {len(raw)} (truncated?)"
        )
    data = np.frombuffer(raw, "<f4", count=2 * width * height, offset=12)
    return data.reshape(height, width, 2).astype(np.float32)


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
