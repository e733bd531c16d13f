"""Quantization-aware fine-tuning of one stage: distil the fp32 model into its int8 fake-quantized copy.

The student is the fp32 model itself with every Linear fake-quantized (:mod:`pairedge.export.qat.fake`);
the teacher is the fp32 model, frozen. The loss is the mean squared logit difference to the teacher: the
deployment check compares the int8 model with fp32 (decisions and logits), so matching fp32 is the
objective, and it keeps the fp32 model's accuracy with it. Both models stay in eval mode (no dropout, no
batch-norm updates): only the weights move. Every epoch is scored on validation rows (whole validation
sequences of the training scenes, never used for the gradient) by the decision agreement with fp32 and
the logit error; the best epoch is kept (epoch 0: calibrated ranges, no fine-tuning, is a candidate).
Deterministic on CPU (:func:`pairedge.export.train.deterministic`: seeded, one thread).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from pairedge.calibration.infer import decisions as runtime_decisions
from pairedge.core.errors import InputError
from pairedge.export.qat import fake
from pairedge.export.qat.equalize import equalize, first_layer_paths
from pairedge.export.train import deterministic, predict_logits
from torch import nn


@dataclass(frozen=True)
class QatConfig:
    """Hyper-parameters of one stage's fine-tuning (chosen on validation rows only).

    Attributes:
        calibration: activation ranges: ``max``, ``percentile`` or ``mse`` (:func:`fake.calibrate`).
        percentile: with ``percentile``: the percentile of the input magnitudes kept.
        epochs: fine-tuning epochs; lr: AdamW learning rate (cosine decay to 0); batch_size: rows per step.
        samples_per_epoch: rows drawn (uniformly, with replacement) per epoch; None = every training row.
        weight_decay: AdamW weight decay (0: stay at fp32's weights unless the loss says otherwise).
        seed: seeds the row draws and torch.
        equalize: the percentile of each z-scored column's magnitudes that
            :mod:`~pairedge.export.qat.equalize` maps to the common input range; None: no input equalisation.
        equalize_strength: how far the column ranges are equalised (``range ** strength``): 1 moves the
            whole spread into the first layer's weights, 0.5 shares it between its input and its weights.
        hidden_strength: the same for the hidden units (cross-layer equalisation); 0: none.
        huber: the loss: Huber on the logit difference with this threshold (outlier rows, whose activations
            the int8 ranges clip, cannot dominate the gradient); None: the squared difference.
        input_percentile: the activation range of the first layers' (z-scored) input; None: ``percentile``.
        input_headroom, hidden_headroom: each calibrated range of the first layers' / the other layers'
            input is multiplied by this (>= 1), so rows beyond the training rows' extremes (a detector
            glitch) saturate later (as ``pairedge calibrate``'s).
        gate_floor: stage 2 only: its rows are the together pairs plus every pair the fp32 stage 1 gives at
            least this ``p_interact`` (what the runtime's stage 2 sees, with a margin below the threshold).
        float_layers: module paths of the Linear layers kept float (no Q/DQ: fp16 on TensorRT), e.g. the
            ones :func:`pairedge.export.qat.sensitivity.float_sweep` chose.
        float_budget: the largest share of the multiply-adds per row the sensitivity sweep may keep float
            (0: no sweep, every layer int8 but ``float_layers``); float_target: the validation agreement
            at which the sweep stops adding layers.
    """

    calibration: str = "percentile"
    percentile: float = 99.99
    epochs: int = 8
    lr: float = 3e-4
    batch_size: int = 512
    samples_per_epoch: int | None = 100_000
    weight_decay: float = 0.0
    seed: int = 0
    gate_floor: float = 0.3
    equalize: float | None = 99.99
    equalize_strength: float = 0.5
    hidden_strength: float = 0.5
    huber: float | None = 0.1
    input_percentile: float | None = None
    input_headroom: float = 1.0
    hidden_headroom: float = 1.0
    float_layers: tuple[str, ...] = ()
    float_budget: float = 0.0
    float_target: float = 0.995

    def __post_init__(self) -> None:
        if isinstance(self.float_layers, str):  # tuple("person.0") would be its characters
            raise InputError(
                f"QAT config: float_layers: expected a list of module paths, got {self.float_layers!r}"
            )
        object.__setattr__(self, "float_layers", tuple(self.float_layers))
        if not all(isinstance(p, str) and p for p in self.float_layers):
            raise InputError(f"QAT config: float_layers: expected module paths, got {self.float_layers!r}")
        if not (0.0 <= self.float_budget <= 1.0 and 0.0 < self.float_target <= 1.0):
            raise InputError(
                f"QAT config: expected float_budget in [0, 1] and float_target in (0, 1], got "
                f"{self.float_budget}, {self.float_target}"
            )
        if self.calibration not in fake.CALIBRATIONS:
            raise InputError(
                f"QAT calibration: expected one of {list(fake.CALIBRATIONS)}, got {self.calibration!r}"
            )
        if self.epochs < 0 or self.lr <= 0 or self.batch_size < 2 or not 50 < self.percentile <= 100:
            raise InputError(
                f"QAT config: expected epochs >= 0, lr > 0, batch_size >= 2 and percentile in (50, 100], got "
                f"{self.epochs}, {self.lr}, {self.batch_size}, {self.percentile}"
            )

        if not (1.0 <= self.input_headroom < float("inf") and 1.0 <= self.hidden_headroom < float("inf")):
            raise InputError(
                f"QAT config: expected input_headroom and hidden_headroom >= 1 (finite), got "
                f"{self.input_headroom}, {self.hidden_headroom}"
            )

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> QatConfig:
        """The config of a recipe entry (unknown keys are an error: a typo must not pass silently)."""
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise InputError(
                f"QAT config: unknown key(s) {unknown}; expected some of {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**values)


@dataclass(frozen=True)
class QatResult:
    """What :func:`finetune` produced: the fake-quantized model (eval mode, best epoch), its activation ranges
    by layer path, the per-epoch validation history, the best epoch (0 = calibration only), its validation
    scores and the (F,) input equalisation gains (None: none)."""

    model: nn.Module
    ranges: dict[str, float]
    history: list[dict[str, Any]]
    best_epoch: int
    validation: dict[str, float] = field(default_factory=dict)
    gains: np.ndarray | None = None


def decisions(stage: int, z: np.ndarray, tau: float) -> np.ndarray:
    """(N,) decisions of (N, C) logits as the runtime takes them (stage 1: the gate, stage 2: top-1)."""

    return runtime_decisions(stage, z, tau)


def score(stage: int, reference: np.ndarray, candidate: np.ndarray, tau: float) -> dict[str, float]:
    """Decision agreement and absolute logit error of (N, C) ``candidate`` against (N, C) ``reference``."""
    err = np.abs(candidate.astype(np.float64) - reference.astype(np.float64)).max(axis=1)
    same = decisions(stage, reference, tau) == decisions(stage, candidate, tau)
    return {
        "agreement": float(same.mean()),
        "max_abs": float(err.max()),
        "p99_abs": float(np.percentile(err, 99)),
        "mean_abs": float(err.mean()),
    }


def finetune(
    fp32: nn.Module, stage: int, X_train: np.ndarray, X_val: np.ndarray, config: QatConfig, tau: float = 0.5
) -> QatResult:
    """Fine-tune a fake-quantized copy of ``fp32`` to match it (see the module docstring).

    Args:
        fp32: the fp32 model (raw features (N, F) float32 -> logits (N, C)); not modified.
        stage: 1 or 2 (how decisions are taken for the validation agreement).
        X_train: (N, F) float32 training rows (gradient and activation ranges); X_val: (M, F) validation rows.
        config: the hyper-parameters; tau: stage 1's ``p_interact`` threshold.
    """
    with deterministic(config.seed):
        teacher = copy.deepcopy(fp32).eval()
        student, ranges, gains = quantized_student(fp32, X_train, config)
        t_train = torch.from_numpy(predict_logits(teacher, X_train))
        t_val = predict_logits(teacher, X_val)
        history: list[dict[str, Any]] = [
            {"epoch": 0, "loss": None, **score(stage, t_val, predict_logits(student, X_val), tau)}
        ]
        best, best_state = 0, copy.deepcopy(student.state_dict())
        params = [p for p in student.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(config.epochs, 1))
        rng = np.random.default_rng(config.seed)
        X = torch.from_numpy(np.ascontiguousarray(X_train, np.float32))
        for epoch in range(1, config.epochs + 1):
            loss = _epoch(student, opt, X, t_train, rng, config)
            sched.step()
            history.append(
                {"epoch": epoch, "loss": loss, **score(stage, t_val, predict_logits(student, X_val), tau)}
            )
            if _key(history[-1]) > _key(history[best]):
                best, best_state = epoch, copy.deepcopy(student.state_dict())
        student.load_state_dict(best_state)
        student.eval()
    validation = {k: float(v) for k, v in history[best].items() if k not in ("epoch", "loss")}
    return QatResult(student, ranges, history, best, validation, gains)


def quantized_student(
    fp32: nn.Module, X_train: np.ndarray, config: QatConfig
) -> tuple[nn.Module, dict[str, float], np.ndarray | None]:
    """A fake-quantized copy of ``fp32`` before fine-tuning: equalised, its Linear layers but
    ``config.float_layers`` quantized, the activation ranges calibrated on (N, F) ``X_train``. Returns the
    student (eval mode), its ranges by layer path and the (F,) input gains (None: no equalisation).

    Raises:
        InputError: a ``float_layers`` path that is no Linear layer of the model.
    """
    linears = {name for name, m in fp32.named_modules() if isinstance(m, nn.Linear)}
    unknown = sorted(set(config.float_layers) - linears)
    if unknown:
        raise InputError(f"QAT config: float_layers {unknown}: expected Linear layers of {sorted(linears)}")
    student = copy.deepcopy(fp32).eval()
    gains = (
        None
        if config.equalize is None
        else equalize(student, X_train, config.equalize, config.equalize_strength, config.hidden_strength)
    )
    fake.prepare(student, config.float_layers)
    layers = fake.quant_layers(student)
    first = first_layer_paths(student)
    wide = {} if config.input_percentile is None else dict.fromkeys(first, config.input_percentile)
    ranges = fake.calibrate(student, X_train, config.calibration, config.percentile, wide)
    for path, layer in layers.items():  # headroom beyond the calibrated extremes
        ranges[path] *= config.input_headroom if path in first else config.hidden_headroom
        layer.amax.fill_(ranges[path])
    return student, ranges, gains


def _key(row: dict[str, float]) -> tuple[float, float]:
    """Best epoch: the highest validation agreement, then the smallest p99 logit error."""
    return row["agreement"], -row["p99_abs"]


def _epoch(
    student: nn.Module,
    opt: torch.optim.Optimizer,
    X: torch.Tensor,
    target: torch.Tensor,
    rng: np.random.Generator,
    config: QatConfig,
) -> float:
    """One epoch of logit-matching steps on rows drawn uniformly; returns the mean loss."""
    n = config.samples_per_epoch or len(X)
    order = rng.integers(0, len(X), size=n) if config.samples_per_epoch else rng.permutation(len(X))
    total = 0.0
    for start in range(0, len(order), config.batch_size):
        idx = torch.from_numpy(order[start : start + config.batch_size])
        opt.zero_grad(set_to_none=True)
        diff = student(X[idx]) - target[idx]
        if config.huber is None:
            loss = torch.mean(diff**2)
        else:
            loss = torch.nn.functional.huber_loss(diff, torch.zeros_like(diff), delta=config.huber)
        loss.backward()
        opt.step()
        total += float(loss.detach()) * len(idx)
    return total / max(len(order), 1)
