"""Training with augmented copies of the training sequences, and an optional refit on everything.

Data with few, long sequences (Collective Activity: 32 sequences, some classes in 5 of them) gains from
label-preserving copies of its sequences (a horizontal mirror, a time reversal:
:data:`pairedge.export.datasets.cad_context.AUGMENTATIONS`) and from training the final model on the
validation sequences too. Both must leave the choice of the epoch honest:

* early stopping scores the ORIGINAL rows of whole validation sequences; the copies of those sequences are
  never trained on while the epoch is chosen (a mirrored validation sequence is the same people);
* ``refit``: once the epoch count is chosen, a fresh model is trained for that many epochs on every original
  row and every copy (:func:`pairedge.export.refit.refit`). Nothing then validates the final model: the
  reported validation metrics are the early-stopped model's, and say so.

Copies carry the group (sequence) id of the sequence they were made from; rows whose group is in no
validation sequence (e.g. extra sequences from elsewhere) are always trained on.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pairedge.core.errors import InputError
from pairedge.core.io.featurefile import FeatureData, concat_rows
from pairedge.export.data import split_by_sequence
from pairedge.export.models import get_normalization
from pairedge.export.train import TrainConfig, TrainResult, train


def train_augmented(
    data: FeatureData,
    copies: list[FeatureData],
    config: TrainConfig,
    *,
    val_mask: np.ndarray | None = None,
    refit: bool = False,
    stage: int | None = None,
    progress: bool = False,
) -> TrainResult:
    """Train on ``data`` plus ``copies`` with early stopping on whole sequences of ``data`` only.

    Args:
        data: the original rows (N, F); its groups are the sequences.
        copies: augmented rows in the same layout (groups = the sequence each was made from).
        config: hyper-parameters (``config.val_fraction`` / ``seed`` choose the split when ``val_mask`` is
            None, as :func:`pairedge.export.train.train` does).
        val_mask: (N,) bool validation rows of ``data`` (whole sequences); None = :func:`split_by_sequence`.
        refit: retrain a fresh model on all rows of ``data`` and ``copies`` for the chosen epoch count.

    Returns:
        The :class:`TrainResult` of the early-stopped run, with ``model`` (and its normalisation) replaced by
        the refit model when ``refit``; ``info["refit"]`` says which.
    """
    for c in copies:
        if c.num_features != data.num_features or c.labels != data.labels:
            raise InputError(
                f"augmented copies must have the data's layout: {c.num_features} features / {list(c.labels)} "
                f"against {data.num_features} / {list(data.labels)}"
            )
    if val_mask is None:
        val_mask = split_by_sequence(data.groups, data.y, config.val_fraction, config.seed)
    val_mask = np.asarray(val_mask, bool)
    val_groups = np.unique(data.groups[val_mask])
    kept = [c.subset(~np.isin(c.groups, val_groups)) for c in copies]
    combined = concat_rows([data, *kept])
    mask = np.concatenate([val_mask, np.zeros(len(combined.y) - len(data.y), bool)])
    result = train(combined, config, stage=stage, val_mask=mask, progress=progress)
    info = {**result.info, "augmented_rows": len(combined.y) - len(data.y), "refit": None}
    if not refit:
        return replace(result, info=info)
    from pairedge.export.refit import refit as refit_model

    everything = concat_rows([data, *copies])
    model = refit_model(everything, config, result.best_epoch, stage=result.stage)
    mean, std = get_normalization(model)  # the statistics refit standardised with
    info["refit"] = {"epochs": result.best_epoch, "rows": len(everything.y)}
    return replace(result, model=model, norm_mean=mean, norm_std=std, info=info)
