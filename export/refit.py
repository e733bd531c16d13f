"""Refit after early stopping: train on ALL the given rows for a number of epochs chosen elsewhere.

:func:`pairedge.export.train.train` holds out whole sequences to choose the epoch. When classes live in few
sequences (Collective Activity: 5 of 32 hold every queue), that held-out part is data the final model never
sees. :func:`refit` trains a fresh model on every row for exactly the chosen number of epochs, with the same
sampler, loss, optimiser and learning-rate schedule as ``train`` (cosine over ``config.epochs``, stopped
after ``epochs``), so epoch ``e`` of the refit sees the learning rates epoch ``e`` of the early-stopped run
saw. Nothing here looks at validation rows: the epoch count must come from data disjoint from any rows the
refit model is later scored on.
"""

from __future__ import annotations

import numpy as np
import torch
from pairedge.core.errors import InputError
from pairedge.export.data import FeatureData, balanced_indices, standardization_stats
from pairedge.export.losses import FocalLoss
from pairedge.export.models import build_model, set_normalization
from pairedge.export.train import TrainConfig, _epoch, deterministic, resolve_model_config
from torch import nn


def refit(data: FeatureData, config: TrainConfig, epochs: int, stage: int | None = None) -> nn.Module:
    """A model (eval mode) trained on every row of ``data`` for ``epochs`` epochs (1 <= epochs <=
    ``config.epochs``); deterministic in ``config.seed`` on CPU.

    Args:
        data: features (N, F), labels and groups (the groups only balance the sampler).
        config: the hyper-parameters of the early-stopped run (its ``epochs`` sets the LR schedule).
        epochs: how many epochs to train, e.g. ``TrainResult.best_epoch`` of that run.
        stage: 1 or 2; None = ``data.stage`` (2 when unknown and the data has more than 2 classes).
    """
    if not 1 <= epochs <= config.epochs:
        raise InputError(f"refit: expected 1 <= epochs <= {config.epochs} (config.epochs), got {epochs}")
    if len(data.y) < 2:
        raise InputError(f"refit: expected at least 2 rows, got {len(data.y)}")
    stage = stage or data.stage or (1 if len(data.labels) == 2 else 2)
    model_config = resolve_model_config(data, stage, config)
    mean, std = standardization_stats(data.X)
    X, y = torch.from_numpy(data.X), torch.from_numpy(data.y)
    per_epoch = config.samples_per_epoch or len(data.y)
    rng = np.random.default_rng(config.seed)
    noise = None
    if config.input_noise > 0:
        noise = torch.from_numpy(data.X.std(axis=0).astype(np.float32)) * config.input_noise
    with deterministic(config.seed, config.threads):
        model = build_model(model_config)
        set_normalization(model, mean, std, data.X)
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=config.epochs)
        loss_fn = FocalLoss(config.gamma)
        groups = data.groups if config.balance_sequences else None
        for _ in range(epochs):
            order = balanced_indices(data.y, per_epoch, rng, groups)
            _epoch(model, opt, loss_fn, X, y, order, config.batch_size, noise)
            sched.step()
    model.eval()
    return model
