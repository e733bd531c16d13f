"""The builder's timing cache: loaded before a build, saved after it (a cache file speeds up rebuilds).

A cache from another TensorRT version or GPU is not an error: TensorRT would reject it, so it is logged
and a fresh cache is used (``ignore_mismatch=False`` keeps TensorRT from mixing timings of different GPUs).
A path that is not a cache file at all (a folder, a FIFO, a device, a file above
:data:`pairedge.core.limits.MAX_ENGINE_BYTES`) is an error: it is refused before it is opened.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from pairedge.core import limits

LOG = logging.getLogger("pairedge.tensorrt")


def attach_timing_cache(config: Any, path: Path | None) -> tuple[Any, int]:
    """Create a timing cache from ``path`` (empty when missing) and set it on ``config``.

    Returns:
        (the cache object, bytes loaded from disk).

    Raises:
        FormatError: ``path`` exists but is not a regular file, or is above the ceiling.
    """
    data = b""
    if path is not None and path.exists():
        data = limits.read_bytes(path, "a TensorRT timing cache", limits.MAX_ENGINE_BYTES)
    cache = config.create_timing_cache(data)
    if cache is None and data:
        LOG.warning("timing cache %s is not readable by this TensorRT; starting a new one", path)
        data = b""
        cache = config.create_timing_cache(b"")
    if not config.set_timing_cache(cache, False):
        LOG.warning("timing cache %s does not match this TensorRT / GPU; starting a new one", path)
        data = b""
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, False)
    return cache, len(data)


def save_timing_cache(config: Any, path: Path | None) -> int:
    """Write the config's timing cache to ``path`` atomically; returns the bytes written (0 without a
    path)."""
    if path is None:
        return 0
    blob = bytes(memoryview(config.get_timing_cache().serialize()))
    if path.exists() and not path.is_file():  # never replace a folder, FIFO or device by a cache
        limits.regular_file(path, "a TensorRT timing cache to overwrite")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(blob)
    os.replace(tmp, path)
    return len(blob)
