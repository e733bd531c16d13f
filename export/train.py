"""Training: focal loss, class-balanced sampling, AdamW, early stopping on validation MPCA, determinism.

``train(data, config)`` splits ``data`` by sequence (never by frame), fits the z-score statistics on the
training rows (they become buffers of the model, so the exported graph takes raw features), trains with a
class-balanced sampler and the focal loss, and keeps the epoch with the best validation mean per-class
accuracy. Runs are deterministic on CPU: seeded numpy / torch generators, single-threaded torch and
``torch.use_deterministic_algorithms(True)`` (restored afterwards), so the same call gives identical metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from pairedge.core.errors import InputError
from pairedge.core.features import get_spec
from pairedge.core.labels import STAGE1
from pairedge.export.checkpoint import DEFAULT_THRESHOLDS, Checkpoint
from pairedge.export.data import FeatureData, balanced_indices, split_by_sequence, standardization_stats
from pairedge.export.evaluation import classification_metrics
from pairedge.export.losses import FocalLoss
from pairedge.export.models import (
    ModelConfig,
    build_model,
    count_parameters,
    set_normalization,
    with_default_hidden,
)
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from torch import nn


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters. ``None`` means the default for the stage / data.

    Attributes:
        architecture: model family; None = ``stage1_mlp`` for stage 1, ``relation_net`` for stage 2 when
            the data declares an ``[a, b, pair]`` layout, else the paper's ``residual_mlp``.
        hidden: hidden widths (empty = the architecture default).
        dropout: None = 0.1 (0.3 for ``residual_mlp``, as in the paper).
        epochs, patience: at most ``epochs``; stop after ``patience`` epochs without a better val MPCA.
        samples_per_epoch: class-balanced draws per epoch; None = the number of training rows.
        val_fraction: share of rows (whole sequences) held out for validation.
        threads: torch intra-op threads during training (1 = bit-reproducible).
        balance_sequences: also equalise the sequences within each class when sampling.
        input_noise: augmentation: Gaussian noise of this many training standard deviations per feature.
        ignore_features: feature names the model must not use (masked inside the graph, see
            :class:`pairedge.export.models.Standardize`); ``"viewpoint"`` stands for the spec's
            camera-placement columns (absolute image size and position, ``FeatureSpec.viewpoint_names``).
        input_squash: squash the z-scores beyond each column's knee inside the graph (``c`` of
            :class:`pairedge.export.models.Standardize`: bounded inputs for every precision, int8 above all);
            None: plain z-scores.
        activation_bound: hidden activations clipped to ``[0, b]`` instead of ReLUs
            (:attr:`pairedge.export.models.ModelConfig.activation_bound`: bounded int8 ranges); None: ReLU.
    """

    architecture: str | None = None
    hidden: tuple[int, ...] = ()
    dropout: float | None = None
    epochs: int = 60
    patience: int = 12
    batch_size: int = 256
    lr: float = 2e-3
    weight_decay: float = 1e-4
    gamma: float = 2.0
    samples_per_epoch: int | None = None
    val_fraction: float = 0.2
    seed: int = 0
    threads: int = 1
    balance_sequences: bool = True
    input_noise: float = 0.0
    ignore_features: tuple[str, ...] = ()
    input_squash: float | None = None
    activation_bound: float | None = None

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.patience < 1 or self.batch_size < 2 or self.lr <= 0:
            raise InputError(
                "train config: expected epochs >= 1, patience >= 1, batch_size >= 2 and lr > 0, got "
                f"{self.epochs}, {self.patience}, {self.batch_size}, {self.lr}"
            )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        out["ignore_features"] = list(self.ignore_features)
        return out


#: ``TrainConfig.ignore_features`` entry standing for the spec's camera-placement columns.
VIEWPOINT = "viewpoint"


def ignored_columns(data: FeatureData, names: tuple[str, ...]) -> tuple[int, ...]:
    """Column indices of the feature ``names`` (with :data:`VIEWPOINT` expanded) in ``data``."""
    if not names:
        return ()
    if len(data.feature_names) != data.num_features:
        raise InputError(
            "ignore_features needs feature names in the data (the dataset builders write them; an .npz needs "
            "a feature_names array)"
        )
    wanted: set[str] = set()
    for name in names:
        if name == VIEWPOINT:
            matched = get_spec(data.feature_spec).viewpoint_names & set(data.feature_names)
            if not matched:
                raise InputError(
                    f"ignore_features: {VIEWPOINT!r} matches no column of these {data.feature_spec!r} "
                    "features (its viewpoint columns are "
                    f"{sorted(get_spec(data.feature_spec).viewpoint_names)})"
                )
            wanted |= matched
        else:
            wanted.add(name)
    unknown = sorted(wanted - set(data.feature_names))
    if unknown:
        raise InputError(
            f"ignore_features: unknown feature names {unknown}; expected {VIEWPOINT!r} or names among "
            f"{list(data.feature_names)}"
        )
    return tuple(i for i, n in enumerate(data.feature_names) if n in wanted)


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` produced. ``model`` is in eval mode with the best epoch's weights."""

    model: nn.Module
    model_config: ModelConfig
    train_config: TrainConfig
    stage: int
    labels: tuple[str, ...]
    history: list[dict[str, float]]
    best_epoch: int
    val_metrics: dict[str, Any]
    train_metrics: dict[str, Any]
    norm_mean: np.ndarray
    norm_std: np.ndarray
    data_fingerprint: str
    val_groups: list[str]
    num_parameters: int
    info: dict[str, Any] = field(default_factory=dict)


@contextmanager
def deterministic(seed: int, threads: int = 1) -> Iterator[None]:
    """Seed torch, force deterministic kernels and a fixed thread count; restore the settings afterwards."""
    prev_threads = torch.get_num_threads()
    prev_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_num_threads(prev_threads)
        torch.use_deterministic_algorithms(prev_det)


def resolve_model_config(data: FeatureData, stage: int, config: TrainConfig) -> ModelConfig:
    """Pick the architecture and widths for ``data`` at ``stage`` (see :class:`TrainConfig`)."""
    arch = config.architecture
    if arch is None:
        if stage == 1:
            arch = "stage1_mlp"
        else:
            arch = "relation_net" if data.person_features > 0 else "residual_mlp"
    dropout = config.dropout if config.dropout is not None else (0.3 if arch == "residual_mlp" else 0.1)
    return with_default_hidden(
        ModelConfig(
            architecture=arch,
            num_features=data.num_features,
            num_classes=len(data.labels),
            hidden=config.hidden,
            dropout=dropout,
            person_features=data.person_features if arch == "relation_net" else 0,
            pair_features=data.pair_features if arch == "relation_net" else 0,
            ignored_features=ignored_columns(data, config.ignore_features),
            input_squash=config.input_squash,
            activation_bound=config.activation_bound,
        )
    )


def predict_logits(model: nn.Module, X: np.ndarray, batch: int = 8192) -> np.ndarray:
    """(N, C) float32 logits of ``model`` in eval mode for raw features X (N, F) float32."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(X), batch):
            out.append(model(torch.from_numpy(np.ascontiguousarray(X[start : start + batch]))).numpy())
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def _epoch(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    loss_fn: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    order: np.ndarray,
    batch_size: int,
    noise: torch.Tensor | None = None,
) -> float:
    """One pass over the rows ``order`` (class-balanced draws); returns the mean loss.

    ``noise``: (F,) standard deviations of Gaussian noise added to the raw inputs (augmentation), or None.
    """
    model.train()
    total, count = 0.0, 0
    for start in range(0, len(order), batch_size):
        idx = torch.from_numpy(order[start : start + batch_size])
        if len(idx) < 2:  # BatchNorm needs two rows
            continue
        opt.zero_grad(set_to_none=True)
        x = X[idx] if noise is None else X[idx] + torch.randn(len(idx), X.shape[1]) * noise
        loss = loss_fn(model(x), y[idx])
        loss.backward()
        opt.step()
        total += float(loss.detach()) * len(idx)
        count += len(idx)
    return total / max(count, 1)


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]training[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        disable=not enabled,
    )


def train(
    data: FeatureData,
    config: TrainConfig | None = None,
    *,
    stage: int | None = None,
    val_mask: np.ndarray | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train a classifier on ``data``; see the module docstring.

    Args:
        data: features, labels and sequence ids.
        config: hyper-parameters (defaults when None).
        stage: 1 or 2; None = ``data.stage`` (1 when the data has 2 classes and no stage).
        val_mask: (N,) bool explicit validation rows (whole sequences); None = :func:`split_by_sequence`.
        progress: show a rich progress bar.
    """
    config = config or TrainConfig()
    stage = stage or data.stage or (1 if len(data.labels) == 2 else 2)
    if stage not in (1, 2):
        raise InputError(f"stage must be 1 or 2, got {stage}")
    if stage == 1 and data.labels != STAGE1.classes:
        raise InputError(
            f"stage 1 is interacting-or-not: expected labels {list(STAGE1.classes)}, got "
            f"{list(data.labels)}; build stage-1 data with the dataset builders (or map your classes to 0/1)"
        )
    if val_mask is None:
        val_mask = split_by_sequence(data.groups, data.y, config.val_fraction, config.seed)
    val_mask = np.asarray(val_mask, bool)
    leaked = np.intersect1d(data.groups[val_mask], data.groups[~val_mask])
    if leaked.size:
        raise InputError(
            f"validation split shares sequences with training: {leaked[:5].tolist()}; split by sequence"
        )
    if val_mask.all() or not val_mask.any():
        raise InputError("validation split must leave rows in both training and validation")
    tr, va = data.subset(~val_mask), data.subset(val_mask)
    model_config = resolve_model_config(data, stage, config)
    mean, std = standardization_stats(tr.X)
    with deterministic(config.seed, config.threads):
        model = build_model(model_config)
        set_normalization(model, mean, std, tr.X)
        history, best_epoch, best_state = _fit(model, tr, va, config, progress)
        model.load_state_dict(best_state)
        model.eval()
        val_pred = predict_logits(model, va.X).argmax(1)
        train_pred = predict_logits(model, tr.X).argmax(1)
    return TrainResult(
        model=model,
        model_config=model_config,
        train_config=config,
        stage=stage,
        labels=data.labels,
        history=history,
        best_epoch=best_epoch,
        val_metrics=classification_metrics(va.y, val_pred, data.labels),
        train_metrics=classification_metrics(tr.y, train_pred, data.labels),
        norm_mean=mean,
        norm_std=std,
        data_fingerprint=data.fingerprint(),
        val_groups=sorted(np.unique(va.groups).tolist()),
        num_parameters=count_parameters(model),
        info={"train_rows": len(tr.y), "val_rows": len(va.y), "feature_spec": data.feature_spec},
    )


def _fit(
    model: nn.Module, tr: FeatureData, va: FeatureData, config: TrainConfig, progress: bool
) -> tuple[list[dict[str, float]], int, dict[str, torch.Tensor]]:
    """The epoch loop with early stopping; returns (history, best epoch, best state dict)."""
    X, y = torch.from_numpy(tr.X), torch.from_numpy(tr.y)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=config.epochs)
    loss_fn = FocalLoss(config.gamma)
    per_epoch = config.samples_per_epoch or len(tr.y)
    rng = np.random.default_rng(config.seed)
    noise = None
    if config.input_noise > 0:
        noise = torch.from_numpy(tr.X.std(axis=0).astype(np.float32)) * config.input_noise
    history: list[dict[str, float]] = []
    best_key: tuple[float, float] = (-1.0, -1.0)
    best_epoch, best_state = 0, {k: v.clone() for k, v in model.state_dict().items()}
    with _progress(progress) as bar:
        task = bar.add_task("train", total=config.epochs, status="")
        for epoch in range(1, config.epochs + 1):
            loss = _epoch(
                model,
                opt,
                loss_fn,
                X,
                y,
                balanced_indices(tr.y, per_epoch, rng, tr.groups if config.balance_sequences else None),
                config.batch_size,
                noise,
            )
            sched.step()
            m = classification_metrics(va.y, predict_logits(model, va.X).argmax(1), tr.labels)
            history.append(
                {
                    "epoch": epoch,
                    "loss": loss,
                    "val_accuracy": m["accuracy"],
                    "val_mpca": m["mpca"],
                    "val_macro_f1": m["macro_f1"],
                }
            )
            key = (m["mpca"], m["macro_f1"])
            if key > best_key:
                best_key, best_epoch = key, epoch
                best_state = {k: v.clone() for k, v in model.state_dict().items()}
            status = f"loss {loss:.4f}  val MPCA {m['mpca']:.3f}  best {best_key[0]:.3f} @ {best_epoch}"
            bar.update(task, advance=1, status=status)
            if epoch - best_epoch >= config.patience:
                break
    return history, best_epoch, best_state


def checkpoint_of(
    result: TrainResult, data: FeatureData, thresholds: dict[str, float] | None = None
) -> Checkpoint:
    """The checkpoint of a training run on ``data`` (feature spec, label set, fingerprint, val metrics)."""
    summary = {k: result.val_metrics[k] for k in ("accuracy", "mpca", "macro_f1")}
    return Checkpoint(
        model=result.model,
        config=result.model_config,
        stage=result.stage,
        labels=result.labels,
        feature_spec=data.feature_spec,
        feature_spec_version=data.feature_spec_version,
        thresholds=dict(DEFAULT_THRESHOLDS if thresholds is None else thresholds),
        data_fingerprint=result.data_fingerprint,
        label_set=data.label_set,
        extra={
            "val_metrics": summary,
            "best_epoch": result.best_epoch,
            "train": result.train_config.to_dict(),
            "feature_config": json.loads(data.feature_config) if data.feature_config else {},
            # train_augmented: augmented rows trained on, and the refit (the model is then not the one
            # val_metrics scored)
            **{k: result.info[k] for k in ("augmented_rows", "refit") if k in result.info},
        },
    )
