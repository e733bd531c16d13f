"""pairedge: pairwise human-interaction models from PyTorch to a robot.

Subpackages: :mod:`pairedge.metrics` (evaluation protocols), :mod:`pairedge.export` (PyTorch models, training,
ONNX / TensorRT export), :mod:`pairedge.calibration` (INT8 quantization), :mod:`pairedge.runtime` (the
streaming pipeline a robot embeds). Importing :mod:`pairedge` is cheap and never imports torch.
"""

from __future__ import annotations

from pairedge.errors import (
    BackendError,
    DeviceUnavailableError,
    FormatError,
    InputError,
    MissingDependencyError,
    ModelError,
    PairedgeError,
)

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "DeviceUnavailableError",
    "FormatError",
    "InputError",
    "MissingDependencyError",
    "ModelError",
    "PairedgeError",
    "__version__",
]
