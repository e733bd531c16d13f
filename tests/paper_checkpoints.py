"""Checkpoints in the layout of the paper's released code, for the export tests (needs torch)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def paper_stage1(path: Path, poison: float | None = None) -> Path:
    """A released-code stage-1 checkpoint (seeded); ``poison`` replaces one weight (e.g. NaN)."""
    torch.manual_seed(0)
    classifier = nn.Sequential(
        nn.Linear(7, 32),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(32, 16),
        nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(16, 2),
    )
    state = {f"classifier.{k}": v for k, v in classifier.state_dict().items()}
    state.update(feature_biases=torch.zeros(7), feature_scales=torch.ones(7), feature_weights=torch.rand(7))
    if poison is not None:
        state["classifier.3.weight"][2, 5] = poison
    torch.save(state, path)
    return path
