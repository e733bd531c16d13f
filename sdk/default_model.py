"""The bundled default model: where it is shipped and the recipe that trains it (no torch here).

``pairedge/models/default/`` holds ``stage1.onnx`` (interacting or not) and ``stage2.onnx`` (the paper's
walking / standing / sitting together), trained on simulator scenes of mixed presets (including the moving
lawnmower camera) with the ``pairedge`` feature spec. Reproduce them with one command::

    python -m pairedge.export.default_model --out sdk/models/default

Both files declare :data:`RECIPE` in their metadata (``extra["recipe"]``); a test checks that the shipped
files match it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Everything that decides the default model. Changing it means retraining (the command above).
RECIPE: dict[str, Any] = {
    "name": "pairedge-default",
    "spec": "pairedge",
    "feature_config": {},
    "presets": ["static", "moving", "noisy"],
    "train_seeds": "0-11",
    "test_seeds": "1000-1001",
    "frames": 300,
    "stride": 3,
    "boxes": "detections",
    "stage1": {
        "task": "stage1",
        "architecture": "stage1_mlp",
        "hidden": [64, 32],
        "epochs": 40,
        "patience": 10,
        "samples_per_epoch": 20000,
        "seed": 0,
    },
    "stage2": {
        "task": "paper3",
        "architecture": "relation_net",
        "hidden": [64, 128],
        "epochs": 40,
        "patience": 10,
        "samples_per_epoch": 20000,
        "seed": 0,
    },
}


def default_model_dir() -> Path:
    """The folder of the shipped default model (``stage1.onnx``, ``stage2.onnx``, ``recipe.json``)."""
    return Path(__file__).resolve().parent / "models" / "default"
