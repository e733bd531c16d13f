"""pairedge: pairwise human-interaction models from PyTorch to a robot.

Layers, in import order (docs/architecture.md): :mod:`pairedge.core` (types, errors, the model folder,
readers, features, metrics by protocol, the simulator) -> :mod:`pairedge.gpu` (the one CUDA layer) ->
:mod:`pairedge.runtime` (the streaming pipeline a robot embeds) -> :mod:`pairedge.compare` (the one
comparator, parity) -> :mod:`pairedge.export` and :mod:`pairedge.calibration` (training, ONNX / TensorRT
export, INT8) -> :mod:`pairedge.apps` (CLI, ROS 2 node, demo, bench, eval, doctor, recipes). Importing
:mod:`pairedge` is cheap and never imports torch.
"""

from __future__ import annotations

from pairedge.core.errors import (
    BackendError,
    DeviceUnavailableError,
    FormatError,
    InputError,
    MissingDependencyError,
    ModelError,
    PairedgeError,
)
from pairedge.core.version import __version__

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
