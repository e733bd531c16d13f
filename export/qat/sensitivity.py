"""Mixed precision by measurement: which layers of a stage stay float (fp16 on TensorRT), and why.

A per-layer sensitivity sweep on the selection rows (the validation sequences of the training scenes, never
a held-out scene), before fine-tuning: the fp32 model is equalised, fake-quantized and calibrated as
:func:`pairedge.export.qat.train.finetune` starts (:func:`~pairedge.export.qat.train.quantized_student`),
then, greedily, each layer still int8 is tried in float with the others int8; the one that raises the
decision agreement with fp32 most is kept float, as long as the float layers' share of the multiply-adds
per row stays within ``float_budget`` and the agreement is below ``float_target``. The result names the
layers, their share of the multiply-adds and every measured agreement, so ``recipe.json`` and the int8 file
say which layers are float and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from pairedge.export.qat import fake
from pairedge.export.qat.train import QatConfig, quantized_student, score
from pairedge.export.train import deterministic, predict_logits
from torch import nn


@dataclass(frozen=True)
class SweepResult:
    """What :func:`float_sweep` chose.

    Attributes:
        float_layers: module paths kept float, in the order they were chosen.
        float_mac_share: their share of the multiply-adds per row, in [0, 1].
        agreement_all_int8: validation agreement with every layer int8 (before fine-tuning).
        agreement: validation agreement with ``float_layers`` float (before fine-tuning).
        steps: per greedy step, ``{layer path: agreement with it float too}`` of every candidate tried.
        macs: multiply-adds per row of every Linear layer, by path (a shared encoder counts each call).
    """

    float_layers: tuple[str, ...]
    float_mac_share: float
    agreement_all_int8: float
    agreement: float
    steps: tuple[dict[str, float], ...]
    macs: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "float_layers": list(self.float_layers),
            "float_mac_share": round(self.float_mac_share, 6),
            "agreement_all_int8": round(self.agreement_all_int8, 6),
            "agreement": round(self.agreement, 6),
            "steps": [{k: round(v, 6) for k, v in step.items()} for step in self.steps],
            "macs": dict(self.macs),
        }


def layer_macs(model: nn.Module, num_features: int) -> dict[str, int]:
    """Multiply-adds per row of every Linear layer of ``model`` by module path (one forward pass of one row
    counts the calls: a relation network's person encoder runs twice)."""
    calls: dict[str, int] = {}
    linears = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    hooks = [
        m.register_forward_hook(lambda _m, _i, _o, n=name: calls.__setitem__(n, calls.get(n, 0) + 1))
        for name, m in linears.items()
    ]
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(1, num_features))
    finally:
        for h in hooks:
            h.remove()
    return {name: m.in_features * m.out_features * calls.get(name, 0) for name, m in linears.items()}


def float_sweep(
    fp32: nn.Module, stage: int, X_train: np.ndarray, X_val: np.ndarray, config: QatConfig, tau: float = 0.5
) -> SweepResult:
    """The greedy sweep of the module docstring.

    Args:
        fp32: the fp32 model (raw (N, F) float32 rows -> (N, C) logits); not modified.
        stage: 1 or 2 (how decisions are taken); tau: stage 1's ``p_interact`` threshold.
        X_train: (N, F) rows the activation ranges are calibrated on; X_val: (M, F) selection rows.
        config: the stage's QAT config (its ``float_layers`` are float from the start; ``float_budget`` and
            ``float_target`` bound the sweep).
    """
    macs = layer_macs(fp32, X_train.shape[1])
    total = max(sum(macs.values()), 1)
    with deterministic(config.seed):
        student, _, _ = quantized_student(fp32, X_train, replace(config, float_layers=()))
        reference = predict_logits(fp32, X_val)
        layers = fake.quant_layers(student)

        def agreement() -> float:
            return score(stage, reference, predict_logits(student, X_val), tau)["agreement"]

        all_int8 = agreement()
        for path in config.float_layers:
            layers[path].mode = "float"
        chosen = list(config.float_layers)
        first = agreement() if chosen else all_int8
        steps: list[dict[str, float]] = []
        while first < config.float_target:
            used = sum(macs[p] for p in chosen)
            tried: dict[str, float] = {}
            for path, layer in layers.items():
                if path in chosen or used + macs[path] > config.float_budget * total:
                    continue
                layer.mode = "float"
                tried[path] = agreement()
                layer.mode = "quant"
            if not tried:
                break
            steps.append(tried)
            best = max(tried, key=lambda p: (tried[p], -macs[p]))
            if tried[best] <= first:
                break
            chosen.append(best)
            layers[best].mode = "float"
            first = tried[best]
    return SweepResult(
        tuple(chosen), sum(macs[p] for p in chosen) / total, all_int8, first, tuple(steps), macs
    )
