"""Classifier backends by name, imported lazily.

The table maps a name to ``"module:Class"``. A native TensorRT-engine backend plugs in by adding a row
and a module whose class subclasses :class:`~pairedge.runtime.backends.base.Backend` and reports through
``unavailable_reason`` why it cannot run on a given machine (no GPU, no TensorRT).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from pairedge.core.errors import BackendError, InputError
from pairedge.runtime._registry import availability, load_registered
from pairedge.runtime.backends.base import Backend
from pairedge.runtime.backends.model import ModelFile, load_model

#: name -> "module:Class". Read-only.
BACKENDS: Mapping[str, str] = MappingProxyType(
    {
        "onnxruntime": "pairedge.runtime.backends.ort:OnnxRuntimeBackend",
        "onnxruntime-cuda": "pairedge.runtime.backends.ort:OnnxRuntimeCudaBackend",
        "onnxruntime-tensorrt": "pairedge.runtime.backends.ort:OnnxRuntimeTensorRTBackend",
        "tensorrt": "pairedge.runtime.backends.tensorrt:TensorRTBackend",
    }
)

#: Short names accepted wherever a backend is named (``--backend``, ``--backends``, ``Pipeline.load``) -> the
#: registry name every output prints.
ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "ort-cpu": "onnxruntime",
        "ort-cuda": "onnxruntime-cuda",
        "ort-trt": "onnxruntime-tensorrt",
        "trt": "tensorrt",
    }
)

#: What "auto" tries, in order. The TensorRT provider is left out: it builds engines at start-up.
AUTO_ORDER: tuple[str, ...] = ("onnxruntime-cuda", "onnxruntime")


def canonical_backend_name(name: str) -> str:
    """The registry name of ``name`` (an alias such as ``ort-cpu`` -> ``onnxruntime``); "auto" stays "auto".

    Raises:
        InputError: a name that is neither registered, an alias nor "auto" (the message lists them).
    """
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key == "auto" or key in BACKENDS:
        return key
    aliases = ", ".join(f"{a} = {n}" for a, n in ALIASES.items())
    raise InputError(
        f"unknown classifier backend {name!r}; expected one of {', '.join(BACKENDS)} or 'auto' (aliases: "
        f"{aliases})"
    )


def backend_class(name: str) -> type[Backend]:
    """The class registered under ``name`` or its alias (imports its module)."""
    return load_registered(BACKENDS, canonical_backend_name(name), Backend, "classifier backend")


def available_backends() -> dict[str, str | None]:
    """Every registered name -> None when it runs here, else the reason it does not."""
    return availability(BACKENDS, lambda name: backend_class(name).unavailable_reason())


def resolve_backend_name(name: str = "auto") -> str:
    """The registry name of ``name`` (aliases resolved), or for "auto" the first available of
    :data:`AUTO_ORDER`."""
    name = canonical_backend_name(name)
    if name != "auto":
        return name
    reasons = available_backends()
    for candidate in AUTO_ORDER:
        if reasons.get(candidate) is None:
            return candidate
    raise BackendError(f"no classifier backend can run here: {reasons}")


def get_backend(name: str, model: ModelFile | str | Path, options: object | None = None) -> Backend:
    """Create (not activate) a classifier backend.

    Args:
        name: a registered name, an alias (:data:`ALIASES`) or "auto".
        model: a :class:`ModelFile` or the path of an .onnx file (checked with :func:`load_model`).
        options: the backend's options dataclass, its :attr:`Backend.options_type` (e.g.
            :class:`~pairedge.runtime.backends.ort.OrtOptions` for the ONNX Runtime backends); None: defaults.

    Raises:
        InputError: unknown name, or options of another type. BackendError: not available on this machine.
        ModelError: bad model.
    """
    resolved = resolve_backend_name(name)
    cls = backend_class(resolved)
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendError(f"classifier backend {resolved!r} is not available on this machine: {reason}")
    cls.check_options(options)  # before the model file is read: a wrong options type is one line
    model_file = model if isinstance(model, ModelFile) else load_model(model)
    return cls(model_file, options) if options is not None else cls(model_file)
