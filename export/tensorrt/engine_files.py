"""What every engine build writes the same way: the device it is built on, the engine file, the file records
of its manifest. Shared by the classifier build (:mod:`~pairedge.export.tensorrt.folder`) and the detector
build (:mod:`~pairedge.export.tensorrt.detector`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from pairedge.runtime.backends.tensorrt_loader import EngineEnvironment, environment, sha256_file


def build_environment(trt: Any, memory: Any = None) -> EngineEnvironment:
    """The TensorRT + GPU the engines are built for; ``memory`` None opens (and closes) the installed CUDA
    layer."""
    if memory is not None:
        return environment(trt, memory)
    from pairedge.runtime.backends.cudamem import open_cuda_memory

    own = open_cuda_memory("auto")
    try:
        return environment(trt, own)
    finally:
        own.close()


def file_record(path: Path) -> dict[str, Any]:
    """``{"file", "sha256", "size"}`` of a file on disk (the ONNX an engine was built from)."""
    return {"file": path.name, "sha256": sha256_file(path), "size": path.stat().st_size}


def write_engine(path: Path, plan: bytes) -> dict[str, Any]:
    """Write ``plan`` to ``path`` whole (a ``.partial`` file moved into place); returns its file record."""
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(plan)
    os.replace(tmp, path)
    return {"file": path.name, "sha256": hashlib.sha256(plan).hexdigest(), "size": len(plan)}
