"""Activation ranges of the quantized Gemm inputs, measured on calibration rows (ONNX Runtime, no torch).

:func:`layer_plans` runs the (equalized) fp32 graph on the calibration rows, reads the input of every Gemm
/ MatMul with a constant weight, and gives each weight a :class:`~pairedge.calibration.qdq_graph.LayerPlan`:

- the range by ``method``: ``minmax`` (the largest magnitude), ``percentile`` (that percentile of the
  magnitudes) or ``entropy`` (ONNX Runtime's KL-divergence calibrator), times the headroom
  (``input_headroom`` for the layers that read the standardized features, no Gemm between them and the
  graph input; ``hidden_headroom`` for the others: rows beyond the calibration set's extremes saturate that
  much later).

Gemms that share a weight get one plan: the largest of their ranges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pairedge.calibration.infer import session
from pairedge.calibration.ort_calibrators import entropy_ranges as ort_entropy_ranges
from pairedge.calibration.qdq_graph import LayerPlan, weighted_nodes
from pairedge.core.modelmeta import INPUT_NAME

if TYPE_CHECKING:
    from pairedge.calibration.quantize import QuantConfig

#: Values per tensor the range statistics use (evenly subsampled above it).
MAX_VALUES = 4_000_000


def tensor_values(model: Any, X: np.ndarray, tensors: list[str]) -> dict[str, np.ndarray]:
    """(N, C) float32 values of 2-D ``tensors`` of ``model`` over rows ``X`` (N, F) (ONNX Runtime CPU)."""
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    for t in tensors:
        if t not in have:
            probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    values = session(probe).run(tensors, {INPUT_NAME: np.ascontiguousarray(X, np.float32)})
    return {t: np.asarray(v, np.float32).reshape(len(X), -1) for t, v in zip(tensors, values, strict=True)}


def reads_features(model: Any, tensor: str) -> bool:
    """True when no Gemm / MatMul lies between the graph input and ``tensor`` (a first layer's input)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    stack, seen = [tensor], set()
    while stack:
        node = producer.get(stack.pop())
        if node is None or node.name in seen:
            continue
        if node.op_type in ("Gemm", "MatMul"):
            return False
        seen.add(node.name)
        stack.extend(node.input)
    return True


def value_range(values: np.ndarray, config: QuantConfig) -> float:
    """The calibrated range of one tensor's values (any shape): ``minmax`` the largest magnitude,
    ``percentile`` that percentile of the magnitudes (at least 1e-3 of the largest)."""
    flat = np.abs(values.reshape(-1)).astype(np.float64)
    if flat.size > MAX_VALUES:
        flat = flat[:: -(-flat.size // MAX_VALUES)]
    top = float(flat.max()) if flat.size else 0.0
    if top <= 0:
        return 1.0  # always zero: any range represents it exactly
    if config.method == "percentile":
        return max(float(np.percentile(flat, config.percentile)), top * 1e-3)
    return top


def layer_plans(model: Any, X: np.ndarray, config: QuantConfig) -> dict[str, LayerPlan]:
    """Weight name -> :class:`LayerPlan` of every quantizable Gemm / MatMul of ``model`` (module docstring).

    Args:
        X: (N, F) float32 calibration rows (raw features).
        config: the method, percentile and headroom (``config.exclude`` is not applied here:
            :func:`pairedge.calibration.qdq_graph.qdq_graph` leaves those nodes in float).
    """
    groups = weighted_nodes(model)
    tensors = sorted({n.input[0] for nodes in groups.values() for n in nodes})
    if not tensors:
        return {}
    values = tensor_values(model, X, tensors)
    entropy = entropy_ranges(model, X, config.batch_rows) if config.method == "entropy" else {}
    plans = {}
    for weight, nodes in groups.items():
        inputs = [values[n.input[0]] for n in nodes]
        if config.method == "entropy":
            amax = max(
                float(entropy.get(n.input[0], np.abs(v).max())) for n, v in zip(nodes, inputs, strict=True)
            )
        else:
            amax = max(value_range(v, config) for v in inputs)
        first = all(reads_features(model, n.input[0]) for n in nodes)
        amax *= config.input_headroom if first else config.hidden_headroom
        plans[weight] = LayerPlan(amax=max(amax, 1e-6))
    return plans


def entropy_ranges(model: Any, X: np.ndarray, batch_rows: int = 8192) -> dict[str, float]:
    """Tensor name -> symmetric KL-divergence (entropy) range of ``model``'s tensors on rows ``X`` (ONNX
    Runtime's entropy calibrator, as the "all" placement of :mod:`pairedge.calibration.quantize` runs it)."""
    ranges = ort_entropy_ranges(model, X, batch_rows)
    return {name: float(value[0]["rmax"]) for name, value in ranges.items()}
