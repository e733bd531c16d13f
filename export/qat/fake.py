"""Fake quantization that computes what TensorRT's explicit int8 quantization computes (torch; training only).

The arithmetic is the one of the exported Q/DQ graph (:mod:`pairedge.calibration.qdq_graph`, the one writer),
so a model trained through it is the model the int8 file runs:

- weights: int8 symmetric per output channel, ``scale[c] = max|W[c, :]| / 127`` (zero point 0); the
  largest weight of a channel maps to +-127, none is clipped;
- activations (the input of every Linear): int8 symmetric per tensor, ``scale = amax / 127`` (zero point 0),
  values beyond the range saturate at -128 / 127 (``QuantizeLinear``: round half to even, then saturate);
- bias: float (TensorRT rejects int32 bias Q/DQ); the layer's output: float.

Gradients pass straight through the rounding (and are zero where an activation saturates).
:func:`prepare` swaps every ``nn.Linear`` of a model for a :class:`QuantLinear` holding the same parameters
(state-dict keys unchanged, plus one ``amax`` buffer per layer). The activation ranges are calibrated once
on training rows (:func:`calibrate`) and then kept fixed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import torch
from pairedge.calibration.qdq_graph import LEVELS, MIN_SCALE, LayerPlan
from pairedge.core.errors import InputError
from torch import nn
from torch.nn import functional as F

QMIN, QMAX = -128, 127
# the int8 grid (``scale = range / 127``, MIN_SCALE) is the one Q/DQ writer's: the same constants, bit for bit
CALIBRATIONS = ("max", "percentile", "mse")
#: Values per layer a calibration keeps (rows are subsampled evenly above it).
CALIBRATION_VALUES = 4_000_000


def weight_scales(weight: torch.Tensor) -> torch.Tensor:
    """(C,) float32 per-output-channel scales of a (C, K) weight, ``max|W[c]| / 127`` (no gradient)."""
    return (weight.detach().abs().amax(dim=1) / LEVELS).clamp_min(MIN_SCALE).float()


def fake_weight(weight: torch.Tensor) -> torch.Tensor:
    """(C, K) weight rounded to its per-channel int8 grid, ``round_half_even(W / scale) * scale`` in float32:
    bit for bit what :func:`pairedge.calibration.qdq_graph.quantize_weight` writes (no weight saturates: the
    scale comes from the channel's maximum). Straight-through gradient."""
    scales = weight_scales(weight)[:, None]
    q = torch.clamp(torch.round(weight.float() / scales), -LEVELS, LEVELS) * scales
    return weight + (q - weight).detach()


def fake_activation(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``x`` rounded to the per-tensor int8 grid of step ``scale``, saturating, as ``QuantizeLinear`` ->
    ``DequantizeLinear`` compute it: ``clip(round_half_even(x / scale), -128, 127) * scale`` in float32 (ONNX
    Runtime divides; torch's own fake quantization multiplies by ``1 / scale`` and rounds some ties the other
    way). Straight-through gradient inside the range, zero where the value saturates."""
    step = torch.tensor(float(scale), dtype=torch.float32)
    ratio = x / step
    q = torch.clamp(torch.round(ratio), QMIN, QMAX) * step
    inside = (ratio > QMIN - 0.5) & (ratio < QMAX + 0.5)
    return torch.where(inside, x + (q - x).detach(), q.detach())


class QuantLinear(nn.Module):
    """A Linear layer whose input and weight go through int8 fake quantization (module docstring).

    Modes: ``"quant"`` (fake quantization, the default), ``"float"`` (the float layer) and ``"observe"``
    (the float layer, recording its input for :func:`calibrate`). x: (N, K) -> (N, C).
    """

    amax: torch.Tensor

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self.in_features = linear.in_features
        self.register_buffer("amax", torch.zeros(()))
        self.mode = "quant"
        self.seen: list[np.ndarray] = []

    def act_scale(self) -> float:
        """The int8 step of the input: ``amax / 127`` in float32 (as
        :class:`pairedge.calibration.qdq_graph.LayerPlan`)."""
        amax = float(np.float32(self.amax))
        if not amax > 0:
            raise InputError("QuantLinear: the activation range is not calibrated; run calibrate() first")
        return LayerPlan(amax).scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "observe":
            self.seen.append(x.detach().reshape(-1).numpy().copy())
        if self.mode != "quant":
            return F.linear(x, self.weight, self.bias)
        return F.linear(fake_activation(x, self.act_scale()), fake_weight(self.weight), self.bias)


def prepare(model: nn.Module, keep_float: Collection[str] = (), _prefix: str = "") -> nn.Module:
    """Swap every ``nn.Linear`` of ``model`` (in place) for a :class:`QuantLinear` with the same
    parameters, except the layers whose module paths are in ``keep_float`` (they stay float: fp16 on
    TensorRT)."""
    for name, child in list(model.named_children()):
        path = f"{_prefix}{name}"
        if isinstance(child, nn.Linear):
            if path not in keep_float:
                setattr(model, name, QuantLinear(child))
        else:
            prepare(child, keep_float, f"{path}.")
    return model


def float_layers(model: nn.Module) -> dict[str, nn.Linear]:
    """The layers :func:`prepare` left float, by module path."""
    return {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}


def quant_layers(model: nn.Module) -> dict[str, QuantLinear]:
    """The model's :class:`QuantLinear` layers by module path (``"net.0"``: weight key ``"net.0.weight"``)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, QuantLinear)}


@contextmanager
def mode(model: nn.Module, name: str) -> Iterator[None]:
    """Run every :class:`QuantLinear` of ``model`` in mode ``name`` inside the block, then back to
    ``quant``."""
    layers = quant_layers(model).values()
    for layer in layers:
        layer.mode = name
    try:
        yield
    finally:
        for layer in layers:
            layer.mode = "quant"
            layer.seen = []


def observe(model: nn.Module, X: np.ndarray) -> dict[str, np.ndarray]:
    """Every layer's float input values (flattened, rows evenly subsampled) on (N, F) raw rows ``X``."""
    layers = quant_layers(model)
    step = max(1, -(-len(X) * max(m.in_features for m in layers.values()) // CALIBRATION_VALUES))
    rows = torch.from_numpy(np.ascontiguousarray(X[::step], np.float32))
    with torch.no_grad(), mode(model, "observe"):
        model.eval()
        for start in range(0, len(rows), 8192):
            model(rows[start : start + 8192])
        return {name: np.concatenate(m.seen) for name, m in layers.items()}


def calibrate(
    model: nn.Module,
    X: np.ndarray,
    method: str = "percentile",
    percentile: float = 99.99,
    overrides: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Set every layer's activation range from its float inputs on (N, F) raw rows ``X``.

    ``max``: the largest magnitude; ``percentile``: that percentile of the magnitudes; ``mse``: the range
    minimising the mean squared int8 error (:func:`mse_range`). ``overrides``: layer path -> the percentile of
    that layer (e.g. a wider range for the inputs). Returns the ranges.
    """
    if method not in CALIBRATIONS:
        raise InputError(f"activation calibration: expected one of {list(CALIBRATIONS)}, got {method!r}")
    layers = quant_layers(model)
    ranges = {}
    for name, values in observe(model, X).items():
        layer = layers[name]
        ranges[name] = _range(np.abs(values), method, (overrides or {}).get(name, percentile))
        layer.amax.fill_(ranges[name])
    return ranges


def _range(values: np.ndarray, method: str, percentile: float) -> float:
    """The activation range of magnitudes ``values`` (1-D) by ``method``."""
    top = float(values.max()) if values.size else 0.0
    if top <= 0:
        return 1.0  # an input that is always zero: any range represents it exactly
    if method == "max":
        return top
    if method == "percentile":
        return max(float(np.percentile(values, percentile)), top * 1e-3)
    return mse_range(values)


def mse_range(values: np.ndarray, candidates: int = 64) -> float:
    """The range minimising the mean squared int8 error (rounding + clipping) of magnitudes ``values`` (1-D),
    searched on a log grid from their 90th percentile to their maximum."""
    top = float(values.max()) if values.size else 0.0
    if top <= 0:
        return 1.0
    low = max(float(np.percentile(values, 90)), top * 1e-3)
    sample = values if values.size <= 200_000 else values[:: values.size // 200_000]
    best, best_err = top, np.inf
    for amax in np.geomspace(low, top, candidates):
        scale = amax / LEVELS
        err = float(np.mean((np.minimum(np.rint(sample / scale), QMAX) * scale - sample) ** 2))
        if err < best_err:
            best, best_err = float(amax), err
    return best
