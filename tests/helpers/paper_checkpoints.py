"""The paper's released-code stage-1 module, rebuilt independently of ``pairedge.export.models``, and
checkpoints in its layout for the export tests (needs torch)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class PaperAdaptiveGeometric(nn.Module):
    """Stage 1 of the released code: learned per-feature bias / scale / weight, then a 32-16-2 MLP."""

    def __init__(self, f: int = 7) -> None:
        super().__init__()
        self.feature_weights = nn.Parameter(torch.ones(f))
        self.feature_biases = nn.Parameter(torch.zeros(f))
        self.feature_scales = nn.Parameter(torch.ones(f))
        self.classifier = nn.Sequential(
            nn.Linear(f, 32),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(32, 16),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(16, 2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(((x + self.feature_biases) * self.feature_scales) * self.feature_weights)


def paper_stage1(path: Path, poison: float | None = None) -> Path:
    """A released-code stage-1 checkpoint (seeded); ``poison`` replaces one weight (e.g. NaN)."""
    torch.manual_seed(0)
    state = PaperAdaptiveGeometric().state_dict()
    state["feature_weights"] = torch.rand(7)
    if poison is not None:
        state["classifier.3.weight"][2, 5] = poison
    torch.save(state, path)
    return path
