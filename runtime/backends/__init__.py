"""Classifier backends behind one interface (:class:`Backend`) with a registry by name.

>>> from pairedge.runtime.backends import get_backend
>>> with get_backend("auto", "model/stage1.onnx") as stage1:
...     logits = stage1.infer(features)  # (N, F) float32 -> (N, C) float32

Backends: ``onnxruntime`` (CPU provider, the default), ``onnxruntime-cuda`` and ``onnxruntime-tensorrt``
(need ``onnxruntime-gpu``). :func:`load_model` checks a model file's metadata before any backend runs it.
"""

from pairedge.runtime.backends.base import Backend
from pairedge.runtime.backends.model import ModelFile, load_model
from pairedge.runtime.backends.registry import (
    ALIASES,
    AUTO_ORDER,
    BACKENDS,
    available_backends,
    backend_class,
    canonical_backend_name,
    get_backend,
    resolve_backend_name,
)

__all__ = [
    "ALIASES",
    "AUTO_ORDER",
    "BACKENDS",
    "Backend",
    "ModelFile",
    "available_backends",
    "backend_class",
    "canonical_backend_name",
    "get_backend",
    "load_model",
    "resolve_backend_name",
]
