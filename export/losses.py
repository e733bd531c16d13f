"""Training losses."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class FocalLoss(nn.Module):
    """Multi-class focal loss ``-(1 - p_t)^gamma * log p_t``, averaged over the batch (Lin et al. 2017).

    Args:
        gamma: focusing parameter (2 in the paper); 0 gives cross-entropy.
        alpha: optional (C,) per-class weights; None when class balance comes from the sampler.
    """

    def __init__(self, gamma: float = 2.0, alpha: torch.Tensor | None = None) -> None:
        super().__init__()
        self.gamma = float(gamma)
        self.alpha: torch.Tensor | None
        if alpha is None:
            self.alpha = None
        else:
            self.register_buffer("alpha", alpha.float())

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """logits: (N, C) float32; target: (N,) int64 class ids -> scalar loss."""
        log_p = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
        loss = -((1.0 - log_p.exp()).clamp(min=0.0) ** self.gamma) * log_p
        if self.alpha is not None:
            loss = loss * self.alpha[target]
        return loss.mean()
